#include "model/post_processor.hpp"

namespace brigade::model {

bool post_processor::adds_tokens() const {
  for (const auto& items : templates_) {
    for (const item& i : items) {
      if (!i.is_sequence && !i.ids.empty()) return true;
    }
  }
  return false;
}

std::vector<int32_t> post_processor::apply(std::vector<int32_t> ids) const {
  for (const auto& items : templates_) {
    std::vector<int32_t> out;
    for (const item& i : items) {
      const std::vector<int32_t>& part = i.is_sequence ? ids : i.ids;
      out.insert(out.end(), part.begin(), part.end());
    }
    ids.swap(out);
  }
  return ids;
}

}  // namespace brigade::model

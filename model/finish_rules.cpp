#include "model/finish_rules.hpp"

#include <algorithm>

namespace brigade::model {

const char* to_string(finish_reason r) {
  switch (r) {
    case finish_reason::none:
      return "none";
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
    case finish_reason::context:
      return "context";
  }
  return "?";
}

finish_reason finish_after(int32_t token, const std::vector<int32_t>& stop_ids, int produced,
                           int max_tokens, int sequence_tokens, int max_positions) {
  if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    return finish_reason::stop;
  }
  if (produced >= max_tokens) return finish_reason::length;
  if (sequence_tokens >= max_positions) return finish_reason::context;
  return finish_reason::none;
}

}  // namespace brigade::model

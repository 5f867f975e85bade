#include "actors/expert_share_index.hpp"

#include <algorithm>

namespace brigade::actors {

void expert_share_index::publish(int32_t layer, int32_t expert,
                                 const std::shared_ptr<const model::ffn_weights>& weights) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& copies = entries_[{layer, expert}];
  copies.erase(
      std::remove_if(copies.begin(), copies.end(), [](const auto& c) { return c.expired(); }),
      copies.end());
  const bool known =
      std::any_of(copies.begin(), copies.end(), [&](const auto& c) { return c.lock() == weights; });
  if (!known) copies.push_back(weights);
}

std::shared_ptr<const model::ffn_weights> expert_share_index::find(int32_t layer,
                                                                   int32_t expert) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find({layer, expert});
  if (it == entries_.end()) return nullptr;
  for (const auto& copy : it->second) {
    if (auto alive = copy.lock()) return alive;
  }
  return nullptr;
}

}  // namespace brigade::actors

// What the starter of a topology sets about the prefix cache beyond its manifest: the clock that
// retention reads (tests warp it) and two test hooks. No actor headers here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kvcache/clock.hpp"

namespace brigade::actors {

struct cache_options {
  /// Retention's clock; null: the system clock.
  std::shared_ptr<const kvcache::clock> clock;
  /// Prefill workers check the cache's reference counts after every change and report
  /// violations in their status.
  bool check_invariants = false;
  /// Gets each prompt a prefill worker finished and the logits of its first token (called on
  /// the worker's thread).
  std::function<void(const std::vector<int32_t>& prompt, const float* logits, int vocab)>
      first_logits;
};

}  // namespace brigade::actors

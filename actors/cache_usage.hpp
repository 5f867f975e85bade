// The router's account of what the prefix cache served: prompt tokens and hit tokens per tier
// (pool, host, SSD), per scenario, since the router started. It outlives worker restarts, so
// its totals only grow, as Prometheus counters must.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/cache_report.hpp"

namespace brigade::actors {

class cache_usage {
 public:
  /// The tiers hits come from, in the order of prefix_hit's fields.
  static constexpr std::array<const char*, 3> tiers{"pool", "host", "ssd"};

  /// Counts for scenarios named `scenarios` (by id).
  explicit cache_usage(std::vector<std::string> scenarios);

  void record(const prefix_hit& hit);

  /// {"scenarios": {"chat": {"prompt_tokens", "pool", "host", "ssd"}, ...}} as JSON text.
  std::string to_json() const;

 private:
  struct counts {
    int64_t prompt_tokens = 0;
    std::array<int64_t, 3> hit_tokens{};
  };
  std::vector<std::string> names_;
  std::vector<counts> by_scenario_;
};

}  // namespace brigade::actors

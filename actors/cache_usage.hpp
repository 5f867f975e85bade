// The router's account of what the prefix cache served: prompt tokens and hit tokens per tier
// (pool, host, SSD), per scenario, since the router started. It outlives worker restarts, so
// its totals only grow, as Prometheus counters must.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "actors/cache_report.hpp"

namespace brigade::actors {

/// What the prefix cache served for one scenario: prompt tokens, and hit tokens per tier.
struct scenario_cache_usage {
  std::string scenario;
  int64_t prompt_tokens = 0;
  std::array<int64_t, 3> hit_tokens{};  ///< By tier, in cache_usage::tiers order.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scenario_cache_usage& x) {
  return f(caf::meta::type_name("scenario_cache_usage"), x.scenario, x.prompt_tokens,
           x.hit_tokens[0], x.hit_tokens[1], x.hit_tokens[2]);
}

class cache_usage {
 public:
  /// The tiers hits come from, in the order of prefix_hit's fields.
  static constexpr std::array<const char*, 3> tiers{"pool", "host", "ssd"};

  /// Counts for scenarios named `scenarios` (by id).
  explicit cache_usage(std::vector<std::string> scenarios);

  void record(const prefix_hit& hit);

  /// Every scenario's totals, in scenario id order.
  const std::vector<scenario_cache_usage>& totals() const { return by_scenario_; }

 private:
  std::vector<scenario_cache_usage> by_scenario_;
};

}  // namespace brigade::actors

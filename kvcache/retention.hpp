// Scenarios and their retention periods: how long a cached block outlives its last use.
//
// Every request carries a scenario (chat unless it says otherwise). A block expires at its last
// use plus the retention period of that use's scenario; a block used under several scenarios
// keeps the latest such expiry, so the longest retention wins.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "kvcache/clock.hpp"

namespace brigade::kvcache {

/// A scenario (traffic class) and how long its cached KV blocks outlive their last use.
struct scenario_retention {
  std::string name;         ///< [a-z0-9_-], 1 to 64 characters.
  int64_t retention_s = 0;  ///< Positive.
};

/// A scenario's index in its retention table; small so that every cache entry can carry one.
using scenario_id = std::uint16_t;

class retention {
 public:
  /// The scenario of a request that names none.
  static constexpr scenario_id chat = 0;
  static constexpr scenario_id agent = 1;
  /// The most scenarios a table holds: manifests name a handful, never thousands.
  static constexpr std::size_t max_scenarios = 256;

  /// The defaults: chat kept 7 days, agent 3 days.
  retention();

  /// Adds a scenario, or changes the period of an existing one (chat and agent included).
  /// Names are 1 to 64 characters of [a-z0-9_-]; periods are positive.
  status set(std::string_view name, std::chrono::seconds period);

  /// The scenario called `name`; an error listing the known names when there is none.
  result<scenario_id> find(std::string_view name) const;

  time_ns period_ns(scenario_id id) const { return scenarios_.at(id).period_ns; }
  const std::string& name(scenario_id id) const { return scenarios_.at(id).name; }
  std::size_t size() const { return scenarios_.size(); }

 private:
  struct scenario {
    std::string name;
    time_ns period_ns = 0;
  };
  std::vector<scenario> scenarios_;
};

}  // namespace brigade::kvcache

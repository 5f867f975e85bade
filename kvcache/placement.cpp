#include "kvcache/placement.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>

namespace brigade::kvcache {

const char* to_string(placement_policy policy) {
  switch (policy) {
    case placement_policy::round_robin:
      return "round_robin";
    case placement_policy::cache_aware:
      return "cache_aware";
    case placement_policy::pooled:
      return "pooled";
  }
  return "unknown";
}

result<placement_policy> parse_placement_policy(std::string_view name) {
  for (auto p :
       {placement_policy::round_robin, placement_policy::cache_aware, placement_policy::pooled}) {
    if (name == to_string(p)) return p;
  }
  return error(errc::invalid_argument, "unknown placement policy '" + std::string(name) +
                                           "': use round_robin, cache_aware or pooled");
}

placement::placement(placement_policy policy, double balance_slack)
    : policy_(policy), balance_slack_(balance_slack) {}

std::size_t placement::place(std::int64_t prompt_tokens, const std::vector<worker_load>& workers) {
  assert(!workers.empty());
  if (policy_ == placement_policy::round_robin) return next_++ % workers.size();
  return place_by_cost(prompt_tokens, workers);
}

std::size_t placement::place_by_cost(std::int64_t prompt_tokens,
                                     const std::vector<worker_load>& workers) const {
  const auto uncached = [&](const worker_load& w) {
    return std::max<std::int64_t>(0, prompt_tokens - w.cached_tokens);
  };
  // The mean computed load once this request is placed, at its cheapest.
  double total = 0;
  std::int64_t min_uncached = std::numeric_limits<std::int64_t>::max();
  for (const auto& w : workers) {
    total += static_cast<double>(w.computed_tokens);
    min_uncached = std::min(min_uncached, uncached(w));
  }
  const double mean_after =
      (total + static_cast<double>(min_uncached)) / static_cast<double>(workers.size());
  const double load_bound = (1.0 + balance_slack_) * mean_after;

  std::size_t best = workers.size();
  double best_cost = 0;
  std::size_t least_loaded = 0;
  double least_load = std::numeric_limits<double>::max();
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const worker_load& w = workers[i];
    const double load_after = static_cast<double>(w.computed_tokens + uncached(w));
    if (load_after < least_load) {
      least_load = load_after;
      least_loaded = i;
    }
    // A full hit adds no computed load anywhere, so the guard never turns it away.
    if (load_after > load_bound && uncached(w) > 0) continue;
    const double cost = static_cast<double>(uncached(w)) + w.queued_tokens;
    const bool better = best == workers.size() || cost < best_cost ||
                        (cost == best_cost && w.computed_tokens < workers[best].computed_tokens);
    if (better) {
      best = i;
      best_cost = cost;
    }
  }
  return best == workers.size() ? least_loaded : best;
}

}  // namespace brigade::kvcache

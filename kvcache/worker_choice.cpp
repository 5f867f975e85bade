#include "kvcache/worker_choice.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>

namespace brigade::kvcache {

const char* to_string(choice_policy policy) {
  switch (policy) {
    case choice_policy::round_robin:
      return "round_robin";
    case choice_policy::cache_aware:
      return "cache_aware";
    case choice_policy::pooled:
      return "pooled";
  }
  return "unknown";
}

result<choice_policy> parse_choice_policy(std::string_view name) {
  for (auto p : {choice_policy::round_robin, choice_policy::cache_aware, choice_policy::pooled}) {
    if (name == to_string(p)) return p;
  }
  return error(errc::invalid_argument, "unknown routing policy '" + std::string(name) +
                                           "': use round_robin, cache_aware or pooled");
}

worker_chooser::worker_chooser(choice_policy policy, double balance_slack)
    : policy_(policy), balance_slack_(balance_slack) {}

std::size_t worker_chooser::choose(std::int64_t prompt_tokens,
                                   const std::vector<worker_load>& workers) {
  assert(!workers.empty());
  if (policy_ == choice_policy::round_robin) return next_++ % workers.size();
  return choose_by_cost(prompt_tokens, workers);
}

std::size_t worker_chooser::choose_by_cost(std::int64_t prompt_tokens,
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

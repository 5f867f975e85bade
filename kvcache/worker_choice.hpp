// Where the router sends a prompt for prefill: the policies, as pure decisions over
// what the router knows of each worker (kvcache/global_prefix_index.hpp gives the cached part).
//
// Cost model of cache_aware, in prefill tokens:
//
//   cost(w) = (prompt_tokens - cached_tokens(w))      the prefill work this request adds on w
//           + queued_tokens(w)                        the work w must finish before it
//
// i.e. the time to the request's first token, in units of one worker's prefill rate. Alone it
// keeps hits high (a worker holding the prefix needs less work) and evens out queues, but not the
// total work: on a lightly loaded cluster queues are empty, so every request of a popular prefix
// would stay on the worker holding it. A balance guard therefore keeps the cumulative computed
// load even: a worker is eligible only if, after taking the request, its computed tokens stay
// within (1 + balance_slack) of the mean, which holds the final max/mean load near 1 + slack;
// a worker holding the whole prompt adds no load and stays eligible. When no worker is
// eligible, the one with the least computed load after the request wins.
// Among eligible workers the lowest cost wins; ties go to the less loaded, then the lower id.
// A prefix every request shares (a system prompt) soon sits on every worker, so it shifts all
// costs alike and cannot pile requests onto one worker.
//
// round_robin ignores the cache. pooled assumes one cache pooled across workers (Mooncake-style:
// any worker reads a block cached anywhere), so cached_tokens is the same everywhere and the cost
// reduces to queued work under the same balance guard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::kvcache {

enum class choice_policy { round_robin, cache_aware, pooled };

/// "round_robin", "cache_aware" or "pooled".
const char* to_string(choice_policy policy);
/// The policy called `name`; an error listing the choices otherwise.
result<choice_policy> parse_choice_policy(std::string_view name);

/// What the router knows about one worker when it chooses a worker for a prompt.
struct worker_load {
  /// Leading prompt tokens the worker (or, for pooled, the pool) already holds.
  std::int64_t cached_tokens = 0;
  /// Prefill tokens queued on the worker and not yet computed.
  double queued_tokens = 0;
  /// Prefill tokens the worker has computed or queued since the start.
  std::int64_t computed_tokens = 0;
};

class worker_chooser {
 public:
  /// `balance_slack`: how far above the mean computed load a worker may go (0.05: 5%).
  explicit worker_chooser(choice_policy policy, double balance_slack = 0.05);

  /// The worker to prefill a prompt of `prompt_tokens`; `workers` is not empty.
  std::size_t choose(std::int64_t prompt_tokens, const std::vector<worker_load>& workers);

  choice_policy policy() const { return policy_; }

 private:
  std::size_t choose_by_cost(std::int64_t prompt_tokens,
                             const std::vector<worker_load>& workers) const;

  choice_policy policy_;
  double balance_slack_;
  std::size_t next_ = 0;
};

}  // namespace brigade::kvcache

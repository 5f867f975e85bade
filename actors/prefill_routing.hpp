// The router's choice of a prefill worker: kvcache::worker_chooser's cache_aware policy over a
// kvcache::global_prefix_index that the workers' cache reports keep up to date.
//
// cost(w) = prompt tokens w would compute (those its pool does not hold) + tokens queued on w,
// among workers whose computed load stays within (1 + balance_slack) of the mean (see
// kvcache/worker_choice.hpp). The computed load starts as the router's estimate when it places a
// request and is corrected to what the worker reports it actually computed, so the balance
// holds even when the router's view of a cache lags behind it.
//
// Only the workers' pools count: the node's KV store serves every worker of the node alike, so
// it changes no worker's cost relative to another's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/cache_report.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/global_prefix_index.hpp"
#include "kvcache/worker_choice.hpp"

namespace brigade::actors {

class prefill_routing {
 public:
  /// Placement over `workers` prefill workers whose pools cache blocks of `block_tokens`, named
  /// by `hasher` (the workers' own key).
  prefill_routing(int workers, int block_tokens,
                  std::shared_ptr<const kvcache::block_hasher> hasher, double balance_slack = 0.05);

  struct choice {
    int worker = -1;              ///< -1 when no worker is alive.
    int64_t uncached_tokens = 0;  ///< The prompt tokens the worker is expected to compute.
  };

  /// Picks a worker for `prompt` (hashed under `salt`, its cache namespace) among those with
  /// alive[w]; queued_tokens[w] is the prefill
  /// work already waiting on w. Counts the expected computed tokens on the chosen worker.
  /// `preferred`, when alive, is taken whatever the balance: it holds the prompt of a request
  /// this one shares it with (the choices of one answer).
  choice choose(const std::vector<int32_t>& prompt, std::string_view salt,
                const std::vector<bool>& alive, const std::vector<int64_t>& queued_tokens,
                int preferred = -1);

  /// Applies a worker's cache events; returns how many were inconsistent with what the router
  /// knew (a lost or duplicated event), which only makes routing less precise.
  size_t apply(const prefill_cache_report& report);
  /// Replaces an estimate of the tokens worker `w` computes for one request by the actual count.
  void correct(int worker, int64_t estimated_tokens, int64_t actual_tokens);
  /// Worker `w` restarted: its pool is empty.
  void cleared(int worker);

  /// Prefill tokens each worker computed (or will), by the router's account.
  const std::vector<int64_t>& computed_tokens() const { return computed_; }
  size_t cached_blocks(int worker) const;

 private:
  int block_tokens_;
  std::shared_ptr<const kvcache::block_hasher> hasher_;
  kvcache::global_prefix_index index_;
  kvcache::worker_chooser policy_;
  std::vector<int64_t> computed_;
  std::vector<size_t> leading_;  // scratch: leading cached blocks per worker
};

}  // namespace brigade::actors

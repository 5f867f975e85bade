// Trace replay: runs a request trace through brigade's own prefix index, eviction, cache events,
// global index and placement, without model compute, and counts prefix-cache hits per replica.
//
// Time model: requests arrive at their trace timestamps. Each replica computes prefill tokens at
// a fixed rate (prefill_tokens_per_s) one request after another, so its queued work at an arrival
// is what remains of the requests placed on it before. Cached prefix tokens cost nothing.
// Decode is not modelled: it runs on other workers in brigade's disaggregated design.
//
// Cache model: a request's blocks are looked up, acquired, the missing full blocks inserted (one
// physical block each) and the whole prefix released when the request is placed, i.e. the cache
// changes in arrival order, as the ideal (an unbounded cache) assumes; only full blocks are
// cacheable. Every request is of scenario chat; expiry runs before each arrival on the trace
// clock. Each replica has its own prefix_index of cache_tokens_per_replica / block_size blocks,
// publishing cache events to a global_prefix_index that the placement reads; under pooled, one
// index of the summed capacity serves every replica.
//
// Hit rate = cached prompt tokens / prompt tokens, over all requests; a replica's load is the
// prefill tokens it computed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/result.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/mooncake_trace.hpp"
#include "kvcache/worker_choice.hpp"

namespace brigade::kvcache {

/// A trace request ready to replay: its arrival, length and the hash chain of its full blocks.
struct replay_request {
  std::int64_t timestamp_ms = 0;
  std::int64_t prompt_tokens = 0;
  std::vector<block_hash> chain;
};

struct replay_options {
  std::size_t replicas = 8;
  std::int64_t cache_tokens_per_replica = 3'100'000;
  std::size_t block_size = 512;
  choice_policy policy = choice_policy::cache_aware;
  /// Each replica's prefill speed; sets how much work queues up (see the time model above).
  double prefill_tokens_per_s = 6000;
  /// The placement's balance guard (kvcache/worker_choice.hpp).
  double balance_slack = 0.05;
};

struct replica_report {
  std::int64_t requests = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t hit_tokens = 0;
  /// Prefill tokens computed: the replica's load.
  std::int64_t computed_tokens = 0;
  /// Blocks evicted to make room for this replica's requests.
  std::int64_t evicted_blocks = 0;
  /// Time requests waited behind earlier prefill work on this replica.
  double mean_queue_wait_s = 0;
  double max_queue_wait_s = 0;
};

struct replay_report {
  choice_policy policy = choice_policy::cache_aware;
  std::int64_t requests = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t hit_tokens = 0;
  double hit_rate = 0;
  /// The hit rate of an unbounded cache in arrival order.
  double ideal_hit_rate = 0;
  /// The largest replica load over the mean replica load.
  double max_over_mean_load = 0;
  /// Blocks removed because their retention ran out (none in a trace shorter than 3 days).
  std::int64_t expired_blocks = 0;
  std::vector<replica_report> replicas;
};

/// Called every few hundred requests with (requests done, requests in all).
using replay_progress = std::function<void(std::size_t, std::size_t)>;

/// How replayed prompts are hashed: brigade's keyed scheme (a fresh random key), or the 64-bit
/// unkeyed XXH3 chain it replaced (kvcache/legacy_hash.hpp), to compare the two side by side.
enum class replay_hashing { keyed, legacy_xxh3_64 };

/// Synthesizes each request's tokens (mooncake_trace.hpp) and hashes its full blocks of
/// `block_size` tokens.
std::vector<replay_request> prepare_replay(const std::vector<trace_request>& trace,
                                           std::size_t block_size,
                                           replay_hashing hashing = replay_hashing::keyed);

/// The hit rate of an unbounded prefix cache fed the requests in arrival order.
double ideal_hit_rate(const std::vector<replay_request>& requests, std::size_t block_size);

/// Replays `requests` under `options`. Errors name a bad option, or a broken invariant of the
/// cache code (the global index disagreeing with a replica's own index).
result<replay_report> replay(const std::vector<replay_request>& requests,
                             const replay_options& options, const replay_progress& progress = {});

}  // namespace brigade::kvcache

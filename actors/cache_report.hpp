// What prefill workers tell the router about their prefix caches: the blocks their pools cached
// and dropped (for the router's kvcache::global_prefix_index) and how much of each admitted
// prompt the cache served, by tier (for placement and the cache metrics).
#pragma once

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <vector>

#include "kvcache/block_hash.hpp"

namespace brigade::actors {

/// One admitted job's prompt and the part of it the cache served.
struct prefix_hit {
  uint64_t request = 0;
  uint32_t attempt = 0;
  uint16_t scenario = 0;      ///< Scenario id in the deployment's retention table.
  int32_t prompt_tokens = 0;  ///< The job's tokens (prompt plus tokens already streamed).
  int32_t pool_tokens = 0;    ///< Served from the worker's pool.
  int32_t host_tokens = 0;    ///< From the KV store's host memory.
  int32_t ssd_tokens = 0;     ///< From the KV store's SSD.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_hit& x) {
  return f(caf::meta::type_name("prefix_hit"), x.request, x.attempt, x.scenario, x.prompt_tokens,
           x.pool_tokens, x.host_tokens, x.ssd_tokens);
}

/// A prefill worker's cache changes since its last report, in the order they happened.
struct prefill_cache_report {
  int32_t worker = 0;  ///< The worker's index among the prefill workers.
  /// Blocks cached or dropped, in the order it happened.
  std::vector<kvcache::block_hash> hashes;
  std::vector<uint8_t> stored;   ///< Per hash: 1 cached (parents come first), 0 evicted or expired.
  std::vector<prefix_hit> hits;  ///< Jobs admitted.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_cache_report& x) {
  return f(caf::meta::type_name("prefill_cache_report"), x.worker, x.hashes, x.stored, x.hits);
}

}  // namespace brigade::actors

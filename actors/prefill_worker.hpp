// Prefill worker: computes the KV of prompts in chunks (several prompts share a step), samples
// each prompt's first token and hands the KV blocks and that token to the chosen decode worker.
// With the prefix cache on (actors/prefix_cache.hpp), a prompt's leading full blocks computed
// before are reused from the worker's pool or fetched from the node's KV store, and its prefill
// starts after them.
//
//   prefill_job --> queued --> admitting: pool hits pinned [, KV store asked for the next blocks]
//                     |          --(KV blocks free)--> prefilling --(last chunk)--> handed off
//                     |                                                   \--refused--> job_failed
//                     \--cancel (any time before the hand-off)--> dropped, blocks given back
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/decode_worker.hpp"
#include "actors/kv_store.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"
#include "actors/shard_set.hpp"

namespace brigade::actors {

struct prefill_job {
  uint64_t request = 0;
  uint32_t attempt = 0;
  std::vector<int32_t> tokens;  ///< Prompt, plus tokens already streamed on a re-dispatch.
  generation_params params;     ///< draw_offset: index of the token this prefill samples.
  decode_worker_actor decode;   ///< Who continues the generation.
  router_actor router;          ///< Where failures go.
  uint16_t scenario = 0;        ///< Retention scenario id (the manifest's kv_cache.scenarios).
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_job& x) {
  return f(caf::meta::type_name("prefill_job"), x.request, x.attempt, x.tokens, x.params, x.decode,
           x.router, x.scenario);
}

using prefill_worker_actor =
    caf::typed_actor<caf::reacts_to<prefill_job>,
                     /// Drops the request's job if it is of this attempt or an older one.
                     caf::reacts_to<cancel_atom, uint64_t, uint32_t>,
                     caf::reacts_to<shards_atom, shard_set>, caf::reacts_to<step_atom>,
                     caf::reacts_to<tick_atom, uint64_t>,
                     /// The node's KV store (again, after a restart).
                     caf::reacts_to<store_atom, kv_store_actor>,
                     /// After a lost contact with the coordinator came back: fresh handles of
                     /// the router and the supervisor; every job it holds is dropped (the router
                     /// re-dispatched them).
                     caf::reacts_to<rebind_atom, router_actor, layout_ack_actor>,
                     caf::replies_to<status_atom>::with<role_status>>;

/// The prefix cache of a prefill worker.
struct prefill_cache_config {
  bool enabled = false;
  /// Cached blocks the pool keeps at most; 0: the whole pool.
  size_t capacity_blocks = 0;
  std::vector<deploy::scenario_retention> scenarios;
  std::shared_ptr<const kvcache::clock> clock;
  /// The node's KV store; a null handle means none.
  kv_store_actor store;
  /// How long a job waits for the KV store's answer before computing its blocks itself.
  std::chrono::milliseconds store_timeout{5000};
  /// Tests: check the cache's reference counts after every change, reporting violations in the
  /// status (costs O(pool blocks) each time).
  bool check_invariants = false;
  /// Tests: gets the prompt and the logits its first token is sampled from.
  std::function<void(const std::vector<int32_t>& prompt, const float* logits, int vocab)>
      first_logits;
};

struct prefill_worker_config {
  std::string name;  ///< "prefill-0"
  int max_step_tokens = 512;
  int kv_tokens = 16384;
  int block_tokens = 16;
  int max_queue = 1024;              ///< Jobs waiting; beyond it new jobs fail back to the router.
  int64_t stall_timeout_ms = 10000;  ///< How long a layer waits for a failed shard's replacement.
  layout_ack_actor layout_acks;      ///< Told when the worker switches layout epochs.
  int index = 0;                     ///< Among the prefill workers: its id in cache reports.
  router_actor router;               ///< Where cache reports go.
  prefill_cache_config cache;
};

// A worker spawned on another node gets everything but the clock and the test hooks, which
// only mean something in the process that set them (it uses the system clock).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_cache_config& x) {
  return f(caf::meta::type_name("prefill_cache_config"), x.enabled, x.capacity_blocks, x.scenarios,
           x.store, x.store_timeout, x.check_invariants);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_worker_config& x) {
  return f(caf::meta::type_name("prefill_worker_config"), x.name, x.max_step_tokens, x.kv_tokens,
           x.block_tokens, x.max_queue, x.stall_timeout_ms, x.layout_acks, x.index, x.router,
           x.cache);
}

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys,
                                          std::shared_ptr<const model_context> ctx,
                                          prefill_worker_config config, shard_set shards);

}  // namespace brigade::actors

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
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/decode_worker.hpp"
#include "actors/kv_store.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"
#include "actors/shard_set.hpp"
#include "actors/worker_reports.hpp"

namespace brigade::actors {

/// A prompt to prefill, from the router: the first token is sampled here, and the sequence goes
/// on at `decode`.
struct prefill_job {
  uint64_t request = 0;
  uint32_t attempt = 0;
  std::vector<int32_t> tokens;  ///< Prompt, plus tokens already streamed on a re-dispatch.
  generation_params params;     ///< draw_offset: index of the token this prefill samples.
  decode_worker_actor decode;   ///< Who continues the generation.
  uint16_t scenario = 0;        ///< Retention scenario id (the manifest's kv_cache.scenarios).
  /// The request's prefix-cache namespace (serve::generation_request::cache_salt).
  std::string cache_salt;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_job& x) {
  return f(caf::meta::type_name("prefill_job"), x.request, x.attempt, x.tokens, x.params, x.decode,
           x.scenario, x.cache_salt);
}

/// A prefill worker's prefix cache, as its status reports it.
struct prefix_cache_status {
  bool enabled = false;
  uint64_t cached_blocks = 0;
  uint64_t pinned_blocks = 0;
  uint64_t capacity_blocks = 0;
  int64_t used_blocks = 0;
  int64_t prompt_tokens = 0;  ///< Prompt tokens of the jobs it admitted.
  int64_t pool_hit_tokens = 0;
  int64_t host_hit_tokens = 0;
  int64_t ssd_hit_tokens = 0;
  bool admitting = false;  ///< A job is being admitted (waiting for the KV store or for blocks).
  int64_t demotion_batches = 0;
  /// Reference-count checks after each change (on while BRIGADE_CHECK_CACHE is set).
  int64_t invariant_checks = 0;
  int64_t invariant_violations = 0;
  std::string first_violation;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_cache_status& x) {
  return f(caf::meta::type_name("prefix_cache_status"), x.enabled, x.cached_blocks, x.pinned_blocks,
           x.capacity_blocks, x.used_blocks, x.prompt_tokens, x.pool_hit_tokens, x.host_hit_tokens,
           x.ssd_hit_tokens, x.admitting, x.demotion_batches, x.invariant_checks,
           x.invariant_violations, x.first_violation);
}

struct prefill_status {
  role_status load;
  int64_t tokens_prefilled = 0;
  double busy_s = 0.0;  ///< Summed step time: with tokens_prefilled, its compute rate.
  int32_t free_kv_blocks = 0;
  bool stalled = false;
  uint64_t epoch = 0;
  prefix_cache_status cache;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_status& x) {
  return f(caf::meta::type_name("prefill_status"), x.load, x.tokens_prefilled, x.busy_s,
           x.free_kv_blocks, x.stalled, x.epoch, x.cache);
}

/// What a prefill worker accepts. It sends the KV of each prompt to the job's decode worker, its
/// failures and cache changes to its config's `reports` (the router), its layout epoch to
/// `layout_acks` and evicted blocks to the node's KV store.
using prefill_worker_actor = caf::typed_actor<
    /// From the router. Failures (a full queue, a refused hand-off) go back as job_failed.
    caf::reacts_to<prefill_job>,
    /// From the router: drops the request's job if it is of this attempt or an older one.
    caf::reacts_to<cancel_atom, uint64_t, uint32_t>,
    /// From the supervisor: the shards and layout to route with from the next step on.
    caf::reacts_to<shards_atom, shard_set>,
    /// From the supervisor: the node's KV store (again, after a restart).
    caf::reacts_to<store_atom, kv_store_actor>,
    /// From its supervisor after a lost contact with the coordinator came back: fresh handles
    /// of the router and the supervisor; every job it holds is dropped (the router re-dispatched
    /// them).
    caf::reacts_to<rebind_atom, prefill_report_actor, layout_ack_actor>,
    caf::replies_to<status_atom>::with<prefill_status>>;

/// The prefix cache of a prefill worker.
struct prefill_cache_config {
  bool enabled = false;
  /// Cached blocks the pool keeps at most; 0: the whole pool.
  size_t capacity_blocks = 0;
  std::vector<kvcache::scenario_retention> scenarios;
  /// Retention's clock; null: the system clock. Never crosses nodes.
  std::shared_ptr<const kvcache::clock> clock;
  /// The node's KV store; a null handle means none.
  kv_store_actor store;
  /// How long a job waits for the KV store's answer before computing its blocks itself.
  std::chrono::milliseconds store_timeout{5000};
};

struct prefill_worker_config {
  std::string name;  ///< "prefill-0"
  int max_step_tokens = 512;
  int kv_tokens = 16384;
  int block_tokens = 16;
  std::string kv_dtype = "f32";      ///< The KV cache's element type: "f32" or "bf16".
  int max_queue = 1024;              ///< Jobs waiting; beyond it new jobs fail back to the router.
  int64_t stall_timeout_ms = 10000;  ///< How long a layer waits for a failed shard's replacement.
  layout_ack_actor layout_acks;      ///< Told when the worker switches layout epochs.
  int index = 0;                     ///< Among the prefill workers: its id in cache reports.
  prefill_report_actor reports;      ///< Where failures and cache reports go.
  prefill_cache_config cache;
};

// A worker spawned on another node gets everything but the clock, which only means something in
// the process that set it (it uses the system clock).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_cache_config& x) {
  return f(caf::meta::type_name("prefill_cache_config"), x.enabled, x.capacity_blocks, x.scenarios,
           x.store, x.store_timeout);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_worker_config& x) {
  return f(caf::meta::type_name("prefill_worker_config"), x.name, x.max_step_tokens, x.kv_tokens,
           x.block_tokens, x.kv_dtype, x.max_queue, x.stall_timeout_ms, x.layout_acks, x.index,
           x.reports, x.cache);
}

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys,
                                          std::shared_ptr<const model_context> ctx,
                                          prefill_worker_config config, shard_set shards);

/// Registers the types above with an actor system's config.
void register_prefill_worker_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors

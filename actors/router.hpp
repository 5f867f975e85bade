// Router: admits requests, picks a prefill worker and a decode worker for each, tracks every
// request until it completes or fails with an explicit error, re-dispatches the work of dead
// workers, and cancels work whose client went away.
//
//   submit --queue full, bad scenario--> refused through the sink (429, 400)
//     |
//   waiting --(a decode worker has room)--> prefilling --(first token)--> decoding --> finished
//     ^                                         |                            |
//     +-------- worker died / job failed -------+----------------------------+
//               (re-dispatched with the tokens already streamed as prompt; never resent)
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/cache_report.hpp"
#include "actors/cache_usage.hpp"
#include "actors/decode_worker.hpp"
#include "actors/payloads.hpp"
#include "actors/prefill_worker.hpp"
#include "serve/inference_service.hpp"

namespace brigade::actors {

/// A request handed over by the service edge, with the sink its output goes to. Refusals (a full
/// queue, an unknown scenario, a duplicate id) also arrive through the sink, as on_error.
struct generation_job {
  serve::generation_request request;
  std::shared_ptr<serve::generation_sink> sink;
};

/// The service edge cancels a request it submitted (the client went away). A type that never
/// crosses nodes, so that only this process can cancel its own requests.
struct service_cancel {
  int64_t service_id = 0;
};

/// A prefill worker is (again) up under a stable index.
struct prefill_up {
  int32_t index = 0;
  std::string name;
  prefill_worker_actor handle;
  std::string node;  ///< Where it runs: new work avoids suspected nodes.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_up& x) {
  return f(caf::meta::type_name("prefill_up"), x.index, x.name, x.handle, x.node);
}

/// A decode worker is (again) up under a stable index.
struct decode_up {
  int32_t index = 0;
  std::string name;
  decode_worker_actor handle;
  int32_t capacity = 0;  ///< Sequences it runs at once.
  std::string node;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, decode_up& x) {
  return f(caf::meta::type_name("decode_up"), x.index, x.name, x.handle, x.capacity, x.node);
}

/// The router's status: requests done and re-dispatched, and what the prefix cache served.
struct router_status {
  role_status load;
  int64_t completed = 0;
  int64_t redispatched = 0;
  /// Token updates and failures from actors that are not the request's workers: dropped.
  int64_t foreign_messages = 0;
  std::vector<scenario_cache_usage> cache_served;
  std::vector<int64_t> computed_tokens;  ///< Per prefill worker: prompt tokens it computed.
  std::vector<uint64_t> cached_blocks;   ///< Per prefill worker, as the global index sees it.
  int64_t cache_event_errors = 0;        ///< Cache reports that did not fit the index.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, router_status& x) {
  return f(caf::meta::type_name("router_status"), x.load, x.completed, x.redispatched,
           x.foreign_messages, x.cache_served, x.computed_tokens, x.cached_blocks,
           x.cache_event_errors);
}

/// What the router accepts. It sends prefill_jobs to prefill workers and cancels to both kinds
/// of worker; the service edge hears back through each request's sink.
using router_actor = caf::typed_actor<
    /// From the service edge (this process only): admits the request or refuses it through its
    /// sink. Never waits for an answer.
    caf::reacts_to<submit_atom, generation_job>, caf::reacts_to<service_cancel>,
    /// From the request's current workers (generation_report_actor, prefill_report_actor).
    caf::reacts_to<std::vector<token_update>>, caf::reacts_to<job_failed>,
    caf::reacts_to<prefill_cache_report>,
    /// From the supervisor: a worker (re)started.
    caf::reacts_to<worker_atom, prefill_up>, caf::reacts_to<worker_atom, decode_up>,
    /// From the membership: a node's heartbeats are late (true) or on time again; new work
    /// avoids suspected nodes while any other worker can take it.
    caf::reacts_to<suspect_atom, std::string, bool>,
    caf::replies_to<status_atom>::with<router_status>>;

struct router_config {
  int admission_queue = 256;  ///< Requests waiting for a worker before submissions get 429.
  int max_attempts = 8;       ///< Dispatches in a row without a new token before a request fails.
  std::chrono::milliseconds retry_backoff{20};
  int prefill_workers = 1;  ///< Prefill workers are indexed 0 .. prefill_workers - 1.
  int block_tokens = 16;    ///< KV block size of the workers' prefix caches.
  /// Scenario names by id (the manifest's kv_cache.scenarios); requests naming others fail.
  std::vector<std::string> scenarios{"chat", "agent"};
  /// How far above the mean computed load a prefill worker may go (actors/prefill_routing.hpp).
  double balance_slack = 0.05;
  /// Requests waiting while no decode (or prefill) worker runs anywhere fail after this long.
  std::chrono::milliseconds no_worker_timeout{30000};
};

/// `hasher` names KV blocks as the prefill workers' caches do (model_context::block_hasher).
router_actor spawn_router(caf::actor_system& sys, router_config config,
                          std::shared_ptr<const kvcache::block_hasher> hasher);

/// Registers the types above with an actor system's config.
void register_router_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::generation_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::service_cancel)

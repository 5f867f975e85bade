// Router: admits requests, picks a prefill worker and a decode worker for each, tracks every
// request until it completes or fails with an explicit error, re-dispatches the work of dead
// workers, and cancels work whose client went away.
//
//   submit --queue full--> refused (429)
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
#include "actors/payloads.hpp"
#include "deploy/manifest.hpp"
#include "serve/inference_service.hpp"

namespace brigade::actors {

/// A request handed over by the service edge, with the sink its output goes to.
struct generation_job {
  serve::generation_request request;
  std::shared_ptr<serve::generation_sink> sink;
};

/// The service edge cancels a request it submitted (the client went away). A type that never
/// crosses nodes, so that only this process can cancel its own requests.
struct service_cancel {
  int64_t service_id = 0;
};

/// The router's answer to a submission: accepted, or refused with an errc value and a message.
struct submit_result {
  bool accepted = true;
  int32_t code = 0;  ///< The errc of a refusal (errc::invalid_argument is 0: read `accepted`).
  std::string message;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, submit_result& x) {
  return f(caf::meta::type_name("submit_result"), x.accepted, x.code, x.message);
}

/// A prefill or decode worker is (again) up under a stable index.
struct worker_up {
  std::string role;  ///< "prefill" or "decode"
  int32_t index = 0;
  std::string name;
  caf::actor handle;
  int32_t capacity = 0;  ///< Decode workers: sequences they run at once.
  std::string node;      ///< Where it runs: new work avoids suspected nodes.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_up& x) {
  return f(caf::meta::type_name("worker_up"), x.role, x.index, x.name, x.handle, x.capacity,
           x.node);
}

using router_actor = caf::typed_actor<
    caf::replies_to<submit_atom, generation_job>::with<submit_result>,
    caf::reacts_to<service_cancel>, caf::reacts_to<std::vector<token_update>>,
    caf::reacts_to<job_failed>, caf::reacts_to<worker_atom, worker_up>, caf::reacts_to<tick_atom>,
    /// A node's heartbeats are late (true) or on time again: new work avoids suspected nodes
    /// while any other worker can take it.
    caf::reacts_to<suspect_atom, std::string, bool>,
    /// A prefill worker's cache changes and hits.
    caf::reacts_to<prefill_cache_report>, caf::replies_to<status_atom>::with<role_status>>;

struct router_config {
  int admission_queue = 256;  ///< Requests waiting for a worker before submissions get 429.
  int max_attempts = 8;       ///< Dispatches in a row without a new token before a request fails.
  std::chrono::milliseconds retry_backoff{20};
  int prefill_workers = 1;  ///< Prefill workers are indexed 0 .. prefill_workers - 1.
  int block_tokens = 16;    ///< KV block size of the workers' prefix caches.
  /// Scenario names by id (the manifest's kv_cache.scenarios); requests naming others fail.
  std::vector<std::string> scenarios{"chat", "agent"};
  /// How far above the mean computed load a prefill worker may go (kvcache/placement.hpp).
  double balance_slack = 0.05;
  /// Requests waiting while no decode (or prefill) worker runs anywhere fail after this long.
  std::chrono::milliseconds no_worker_timeout{30000};
};

/// The router's settings for a deployment of `manifest`.
router_config router_config_for(const deploy::manifest& manifest);

router_actor spawn_router(caf::actor_system& sys, router_config config);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::generation_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::service_cancel)

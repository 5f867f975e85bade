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
#include "actors/payloads.hpp"
#include "serve/inference_service.hpp"

namespace brigade::actors {

/// A request handed over by the service edge, with the sink its output goes to.
struct generation_job {
  serve::generation_request request;
  std::shared_ptr<serve::generation_sink> sink;
};

/// The router's answer to a submission: code 0 (accepted) or an errc value, with a message.
struct submit_result {
  int32_t code = 0;
  std::string message;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, submit_result& x) {
  return f(caf::meta::type_name("submit_result"), x.code, x.message);
}

/// A prefill or decode worker is (again) up under a stable index.
struct worker_up {
  std::string role;  ///< "prefill" or "decode"
  int32_t index = 0;
  std::string name;
  caf::actor handle;
  int32_t capacity = 0;  ///< Decode workers: sequences they run at once.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_up& x) {
  return f(caf::meta::type_name("worker_up"), x.role, x.index, x.name, x.handle, x.capacity);
}

using router_actor =
    caf::typed_actor<caf::replies_to<submit_atom, generation_job>::with<submit_result>,
                     caf::reacts_to<cancel_atom, int64_t>,
                     caf::reacts_to<std::vector<token_update>>, caf::reacts_to<job_failed>,
                     caf::reacts_to<worker_atom, worker_up>, caf::reacts_to<tick_atom>,
                     caf::replies_to<status_atom>::with<role_status>>;

struct router_config {
  int admission_queue = 256;  ///< Requests waiting for a worker before submissions get 429.
  int max_attempts = 8;       ///< Dispatches of one request before it fails for good.
  std::chrono::milliseconds retry_backoff{20};
};

router_actor spawn_router(caf::actor_system& sys, router_config config);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::generation_job)

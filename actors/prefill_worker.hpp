// Prefill worker: computes the KV of prompts in chunks (several prompts share a step), samples
// each prompt's first token and hands the KV blocks and that token to the chosen decode worker.
//
//   prefill_job --> queued --(KV blocks free)--> prefilling --(last chunk)--> handed off
//                      \--cancel--> dropped                              \--refused--> job_failed
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
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_job& x) {
  return f(caf::meta::type_name("prefill_job"), x.request, x.attempt, x.tokens, x.params, x.decode,
           x.router);
}

using prefill_worker_actor =
    caf::typed_actor<caf::reacts_to<prefill_job>, caf::reacts_to<cancel_atom, uint64_t>,
                     caf::reacts_to<shards_atom, shard_set>, caf::reacts_to<step_atom>,
                     caf::reacts_to<tick_atom, uint64_t>,
                     caf::replies_to<status_atom>::with<role_status>>;

struct prefill_worker_config {
  std::string name;  ///< "prefill-0"
  int max_step_tokens = 512;
  int kv_tokens = 16384;
  int block_tokens = 16;
  int max_queue = 1024;  ///< Jobs waiting; beyond it new jobs fail back to the router.
  int64_t stall_timeout_ms = 10000;  ///< How long a layer waits for a failed shard's replacement.
  layout_ack_actor layout_acks;  ///< Told when the worker switches layout epochs.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefill_worker_config& x) {
  return f(caf::meta::type_name("prefill_worker_config"), x.name, x.max_step_tokens, x.kv_tokens,
           x.block_tokens, x.max_queue, x.stall_timeout_ms, x.layout_acks);
}

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys,
                                          std::shared_ptr<const model_context> ctx,
                                          prefill_worker_config config, shard_set shards);

}  // namespace brigade::actors

// Decode worker: continuous batching at the granularity of one step. It owns the KV blocks of its
// running sequences, runs attention and the router (gate) of every layer, sends each MoE layer's
// rows to the expert shards and combines their answers in a fixed order.
//
// A sequence's life here:
//
//   kv_handoff (from a prefill worker) --accepted--> running --(stop | length | context)--> gone
//                                      \--no room--> refused (the router retries elsewhere)
//   cancel --> gone at the next step boundary
//
// With speculation on, each running sequence feeds drafts after its last token and keeps those its
// own samples confirm (model/speculation.hpp): one step may then yield several tokens of a
// sequence, the same tokens plain decoding yields. Drafts come from prompt lookup or from a draft
// model (model/draft_model.hpp) that runs here, beside the worker's sequences, with a KV cache of
// its own; its weights are loaded once per process (model_context::draft).
//
// If an expert shard fails mid-step, the step waits at that layer for the supervisor's new shard
// set and resends the layer (expert FFNs are pure: resending changes nothing); after
// stall_timeout the step's sequences are handed back to the router.
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
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"
#include "actors/shard_set.hpp"
#include "actors/worker_reports.hpp"

namespace brigade::actors {

/// A prefilled sequence moving to a decode worker.
struct kv_handoff {
  uint64_t request = 0;
  uint32_t attempt = 0;
  /// Prompt and generated tokens; the last one was just sampled and is not in the KV yet.
  std::vector<int32_t> tokens;
  int32_t block_tokens = 0;
  /// Per block, per layer: keys then values, each [block_tokens, kv_heads * head_dim] (keys only
  /// when the model's values alias its keys, as MLA's do); blocks cover positions
  /// [0, tokens.size() - 1).
  shared_floats kv;
  /// draw_offset is the generation index of tokens.back(); max_tokens counts it.
  generation_params params;
  int32_t cached_tokens = 0;
  /// The sampled token's log-probabilities, when params asks for them.
  std::vector<model::position_logprobs> logprobs;
  /// The prompt's log-probabilities, when params.prompt_logprobs asks for them.
  std::vector<model::position_logprobs> prompt_logprobs;
};

/// A decode worker's status: its load, its KV blocks, and what speculation did.
struct decode_status {
  role_status load;
  int32_t free_kv_blocks = 0;
  int32_t kv_blocks = 0;
  double step_ms_total = 0.0;  ///< All steps' time: with load.steps, the mean step.
  bool stalled = false;        ///< A step waits for a failed shard's replacement.
  uint64_t epoch = 0;          ///< The layout epoch it routes with.
  int32_t max_draft = 0;
  model::draft_kind draft = model::draft_kind::lookup;  ///< Where the drafts come from.
  std::string draft_weights;           ///< A draft model's weight format; empty without one.
  int32_t draft_attention_window = 0;  ///< A draft model's (0: the whole context).
  model::speculation_stats speculation;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, decode_status& x) {
  return f(caf::meta::type_name("decode_status"), x.load, x.free_kv_blocks, x.kv_blocks,
           x.step_ms_total, x.stalled, x.epoch, x.max_draft, x.draft, x.draft_weights,
           x.draft_attention_window, x.speculation.verify_steps, x.speculation.drafted_tokens,
           x.speculation.proposed_tokens, x.speculation.accepted_tokens,
           x.speculation.emitted_tokens, x.speculation.batch_limited_steps,
           x.speculation.gated_steps, x.speculation.drafted_at, x.speculation.accepted_at,
           x.speculation.calibration.drafts, x.speculation.calibration.predicted,
           x.speculation.calibration.kept);
}

/// What a decode worker accepts. It sends token updates and failures to its config's `reports`
/// (the router), and to its `layout_acks` (the supervisor) the layout epoch it routes with.
using decode_worker_actor = caf::typed_actor<
    /// From a prefill worker: true when the sequence runs here now; an error (no room, a bad
    /// hand-off) makes the prefill worker fail the job back to the router, which retries.
    caf::replies_to<kv_handoff>::with<bool>,
    /// From the router: drops the request's sequence if it is of this attempt or an older one.
    caf::reacts_to<cancel_atom, uint64_t, uint32_t>,
    /// From the supervisor: the shards and layout to route with from the next step on.
    caf::reacts_to<shards_atom, shard_set>,
    /// From its supervisor after contact with the coordinator was lost and came back: fresh
    /// handles of the router and the supervisor (the old ones went with the connection). Every
    /// sequence it runs is dropped: the router re-dispatched them when it lost sight of it.
    caf::reacts_to<rebind_atom, generation_report_actor, layout_ack_actor>,
    caf::replies_to<status_atom>::with<decode_status>>;

struct decode_worker_config {
  std::string name;  ///< "decode-0"
  int max_running = 32;
  int kv_tokens = 65536;
  int block_tokens = 16;
  std::string kv_dtype = "f32";      ///< The KV cache's element type: "f32" or "bf16".
  int64_t stall_timeout_ms = 10000;  ///< How long a layer waits for a failed shard's replacement.
  /// Drafts per step and their source; off when max_draft is 0. A draft model's directory must
  /// exist on the worker's node.
  model::speculation_options speculation;
  layout_ack_actor layout_acks;     ///< Told when the worker switches layout epochs.
  generation_report_actor reports;  ///< Where token updates and failures go.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, decode_worker_config& x) {
  return f(caf::meta::type_name("decode_worker_config"), x.name, x.max_running, x.kv_tokens,
           x.block_tokens, x.kv_dtype, x.stall_timeout_ms, x.speculation, x.layout_acks, x.reports);
}

decode_worker_actor spawn_decode_worker(caf::actor_system& sys,
                                        std::shared_ptr<const model_context> ctx,
                                        decode_worker_config config, shard_set shards);

/// Registers the types above with an actor system (every process that may host or talk to one).
void register_decode_worker_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors

// KV handoffs move within a process as shared buffers and between nodes over the data plane.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::kv_handoff)

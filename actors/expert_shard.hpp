// Expert shard: holds the weights of some physical expert slots and computes expert FFNs on the
// rows routed to them. It counts tokens per logical expert for load balancing.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/expert_weights.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"

namespace brigade::actors {

/// Rows of one MoE layer for this shard: each row goes through the expert in its slot.
struct expert_request {
  uint64_t step = 0;    ///< The caller's step number (load samples count steps).
  uint64_t caller = 0;  ///< Whose steps those are: the worker's actor id, or for calls that came
                        ///< over the data plane a mix of it and the calling node's id.
  uint64_t epoch = 0;   ///< The layout the sender routed with.
  int32_t layer = 0;
  std::vector<int32_t> slots;  ///< Physical slot of each input row.
  tensor_rows input;           ///< [rows, hidden]
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_request& x) {
  return f(caf::meta::type_name("expert_request"), x.step, x.caller, x.epoch, x.layer, x.slots,
           x.input);
}

/// The FFN output of every input row, in the same order.
struct expert_reply {
  uint64_t step = 0;
  int32_t layer = 0;
  tensor_rows output;  ///< [rows, hidden]
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_reply& x) {
  return f(caf::meta::type_name("expert_reply"), x.step, x.layer, x.output);
}

/// A slot this shard holds: the expert in (layer, slot).
struct slot_assignment {
  int32_t layer = 0;
  int32_t slot = 0;
  int32_t expert = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_assignment& x) {
  return f(caf::meta::type_name("slot_assignment"), x.layer, x.slot, x.expert);
}

/// Where a shard gets an expert it does not hold yet: another shard that holds it (an
/// expert_shard_actor; untyped here because that type names this struct).
struct weight_source {
  int32_t layer = 0;
  int32_t expert = 0;
  caf::actor from;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_source& x) {
  return f(caf::meta::type_name("weight_source"), x.layer, x.expert, x.from);
}

/// The slots one shard holds under one layout epoch.
struct shard_plan {
  uint64_t epoch = 0;
  std::vector<slot_assignment> slots;
  /// For experts new to the shard: the peer to copy them from. Experts without a source (or
  /// whose source fails) are read from the node's checkpoint.
  std::vector<weight_source> sources;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_plan& x) {
  return f(caf::meta::type_name("shard_plan"), x.epoch, x.slots, x.sources);
}

/// Tokens a shard routed through each logical expert ([layer][expert]) in one sample window.
struct load_sample {
  int32_t shard = 0;
  uint64_t window = 0;  ///< Window number: steps / sample interval.
  std::vector<std::vector<int64_t>> tokens;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, load_sample& x) {
  return f(caf::meta::type_name("load_sample"), x.shard, x.window, x.tokens);
}

/// Expert weights a shard's background loader read, keyed by (layer, expert). Local only.
struct loaded_experts;

/// Where a shard's background loader sends what it read (the shard itself, privately).
using loaded_sink_actor =
    caf::typed_actor<caf::reacts_to<loaded_atom, uint64_t, std::shared_ptr<loaded_experts>>>;

/// Where a shard's new experts came from, summed over its migrations.
struct expert_copy_counts {
  int64_t same_node = 0;  ///< Shared from a peer shard in this process.
  /// Of same_node: found in the process's share index, without asking the peer (which then
  /// counts no expert sent).
  int64_t same_node_indexed = 0;
  int64_t other_nodes = 0;  ///< Copied from a peer shard on another node.
  int64_t other_nodes_bytes = 0;
  int64_t from_checkpoint = 0;  ///< Read from this node's checkpoint.

  expert_copy_counts& operator+=(const expert_copy_counts& o);
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_copy_counts& x) {
  return f(caf::meta::type_name("expert_copy_counts"), x.same_node, x.same_node_indexed,
           x.other_nodes, x.other_nodes_bytes, x.from_checkpoint);
}

struct expert_shard_status {
  role_status load;
  uint64_t slots = 0;   ///< Slots of its newest epoch.
  uint64_t epochs = 0;  ///< Layout epochs it holds (two during a migration).
  int64_t requests = 0;
  int64_t rows = 0;
  int64_t experts_sent = 0;  ///< Weights it gave peer shards.
  expert_copy_counts experts_received;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_shard_status& x) {
  return f(caf::meta::type_name("expert_shard_status"), x.load, x.slots, x.epochs, x.requests,
           x.rows, x.experts_sent, x.experts_received);
}

/// Where shards send their load samples (the supervisor).
using load_sink_actor = caf::typed_actor<caf::reacts_to<load_sample>>;

/// Expert shard. During a migration it holds two epochs at once: requests name the epoch they
/// were routed with, so steps under the old layout and the new one both find their slots.
///
///   serving epoch e --prepare(e+1)--> copying new experts in the background --> holding e, e+1
///     --release(e+1)--> serving e+1            --abort(e+1)--> serving e
///
/// New experts are copied from the peer shards the plan names (over the data plane when the
/// peer is on another node); the copy out of a shard also runs beside its serving.
using expert_shard_actor =
    caf::typed_actor<caf::replies_to<expert_request>::with<expert_reply>,
                     /// Loads the plan's new slots in the background; replies once they are ready.
                     caf::replies_to<prepare_atom, shard_plan>::with<bool>,
                     /// Drops every epoch older than the given one.
                     caf::reacts_to<release_atom, uint64_t>,
                     /// Drops a prepared epoch that will not be used.
                     caf::reacts_to<abort_atom, uint64_t>,
                     /// The weights of (layer, expert) for a peer that needs them: shared when
                     /// the flag says the peer is in this process, otherwise a copy.
                     caf::replies_to<weights_atom, int32_t, int32_t, bool>::with<expert_weights>,
                     /// After a lost contact with the coordinator came back: a fresh handle of
                     /// the supervisor for load samples (the old one went with the connection),
                     /// and the layout epoch workers route with. Epochs after it (a migration
                     /// that rolled back meanwhile) are dropped; replies whether the shard holds
                     /// that epoch, i.e. whether it may serve again as it is.
                     caf::replies_to<rebind_atom, load_sink_actor, uint64_t>::with<bool>,
                     caf::replies_to<status_atom>::with<expert_shard_status>>;

struct expert_shard_config {
  std::string name;  ///< "expert_shard-2"
  int32_t index = 0;
  shard_plan plan;  ///< The slots to load at spawn.
  int64_t sample_interval_steps = 1000;
  /// The number of its first load sample: a restarted shard numbers on from the supervisor's
  /// windows, so that they close with the other shards' samples.
  uint64_t first_window = 0;
  load_sink_actor load_sink;     ///< Gets a load_sample every sample interval (may be null).
  int32_t copy_interval_ms = 0;  ///< Pause after each expert a migration copies in (bytes moved).
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_shard_config& x) {
  return f(caf::meta::type_name("expert_shard_config"), x.name, x.index, x.plan,
           x.sample_interval_steps, x.first_window, x.load_sink, x.copy_interval_ms);
}

/// Spawns a shard that loads its slots' weights from the context's checkpoint.
expert_shard_actor spawn_expert_shard(caf::actor_system& sys,
                                      std::shared_ptr<const model_context> ctx,
                                      expert_shard_config config);

/// Registers the types above with an actor system's config.
void register_expert_shard_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<brigade::actors::loaded_experts>)

// The background half of an expert shard's migration: gathers the experts a new epoch needs
// that the shard does not hold yet. Each comes from the peer shard the plan names (over the data
// plane when the peer is on another node), one at a time; an expert without a source, or whose
// source cannot give it, is read from this node's checkpoint instead.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "actors/expert_shard.hpp"

namespace brigade::actors {

using expert_key = std::pair<int32_t, int32_t>;  // (layer, expert)

struct loaded_experts {
  std::map<expert_key, std::shared_ptr<const model::ffn_weights>> weights;
  expert_copy_counts counts;
  std::string error;  // empty when every expert arrived
};

/// Reads the plan's experts missing from `have` from the context's checkpoint, on this thread.
std::shared_ptr<loaded_experts> load_from_checkpoint(const model_context& ctx,
                                                     const shard_plan& plan,
                                                     const std::set<expert_key>& have);

/// What a shard asks its loader for: the experts of `plan` missing from `have`.
struct load_job {
  shard_plan plan;
  std::set<expert_key> have;
};

/// Starts a shard's loader: a thread of its own, at the lowest nice level, that takes load_jobs
/// one after another and sends `shard` (loaded_atom, plan.epoch, result) once every expert of a
/// job arrived; (abort_atom, epoch) drops that epoch's job. After each expert that moved bytes
/// (from another node or the checkpoint) it waits `copy_interval` before the next, and a job that
/// moves bytes waits it before its first one too. One per shard for the shard's life, like the
/// exporter: a migration would otherwise start a thread on every shard it touches.
caf::actor spawn_expert_loader(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                               loaded_sink_actor shard, std::chrono::milliseconds copy_interval);

/// What a shard asks its exporter for: a copy of `weights`, which are expert `key`.
struct export_job {
  std::shared_ptr<const model::ffn_weights> weights;
  expert_key key;
};

/// Starts a shard's exporter: a thread of its own, at the lowest nice level, that answers each
/// export_job with the expert copied out of the backend (an expert_weights), one after another.
/// One per shard for the shard's life rather than a thread per copy: a thread start for each
/// expert a migration sends cost serving a sixth of the migration's whole cost (bench balance
/// --migration-nodes, three alternated pairs of runs: steps that overlapped a migration
/// 1.19-1.20x their local median with a thread per copy, 1.15-1.18x with one thread).
caf::actor spawn_expert_exporter(caf::actor_system& sys, std::shared_ptr<const model_context> ctx);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::load_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::export_job)

// What a node checks in a role's spawn request before it builds the role: the configuration comes
// from the coordinator over the network, and a count of zero (a division), a size past any model
// (an allocation) or a layout of another model must be refused with its name, not crash the node.
#pragma once

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/model_context.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/shard_set.hpp"
#include "common/result.hpp"
#include "model/config.hpp"

namespace brigade::actors {

status check_spawn(const model::model_config& model, const expert_shard_config& config);

/// Bytes of KV storage (keys and values, elements of type `element`, whole blocks) for
/// `kv_tokens` tokens.
uint64_t kv_storage_bytes(const model::model_config& model, int kv_tokens, int block_tokens,
                          gpu::dtype element = gpu::dtype::f32);
/// This machine's physical memory in bytes (0 when unknown).
uint64_t physical_memory_bytes();
/// Refuses KV storage of `bytes` (what `what` asks for) that this machine's memory cannot hold:
/// the allocation would fail inside the role, which would then crash and restart for good.
status check_kv_fits(uint64_t bytes, const std::string& what);
/// Bytes of the weights every role on one device shares (model_context::dense: embeddings,
/// attention, norms, routers, shared experts, dense MLPs, the output head), `element_bytes` per
/// weight. An estimate from the config, made before anything is loaded.
uint64_t dense_weight_bytes(const model::model_config& model, size_t element_bytes);
/// Bytes of one weight element in the checkpoint of `dir` (2 for BF16 and F16, else 4; 4 when
/// it cannot be opened here), read from the headers.
size_t checkpoint_element_bytes(const std::string& dir);
/// Bytes of one routed expert of one layer (its gate, up and down matrices).
uint64_t expert_weight_bytes(const model::model_config& model, size_t element_bytes);
status check_spawn(const model::model_config& model, const decode_worker_config& config,
                   const shard_set& shards);
status check_spawn(const model::model_config& model, const prefill_worker_config& config,
                   const shard_set& shards);
/// A decode worker that drafts with a draft model needs it on this node: the directory must
/// exist here and hold a dense model of the target's tokenizer. Loads it (once per process) so
/// that the worker finds it ready.
status check_draft(const model_context& ctx, const decode_worker_config& config);

}  // namespace brigade::actors

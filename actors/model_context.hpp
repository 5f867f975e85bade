// What every role actor in one process shares: the mapped checkpoint, its config, the backend
// and the dense weights (read-only after loading). Expert weights belong to expert shards.
//
// One process may host roles on different devices (a manifest's `device` per role kind and per
// node): there is one context per (model directory, device). The process holds a base context
// (load_config, or a full one from load), and each role takes the base's context for its device
// (on_device), loaded the first time a role asks for that device and kept as long as the base:
// the roles on one device share one copy of the dense weights and one expert share index, and
// roles on another device never touch memory that is not theirs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "gpu/device_choice.hpp"
#include "kvcache/block_hash.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/loaded_model.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace brigade::actors {

class expert_share_index;

struct model_context : std::enable_shared_from_this<model_context> {
  std::string dir;
  /// Where dev computes (meaningful when the weights are loaded).
  gpu::device_choice device;
  model::model_config config;
  std::unique_ptr<model::checkpoint> ckpt;
  std::unique_ptr<gpu::backend> dev;
  /// The same device, computing on the calling thread only. Expert shards use it: they run
  /// side by side, so the parallelism comes from the shards, and a thread pool inside each one
  /// would only oversubscribe the cores. On a CUDA device, dev and serial_dev are two views of
  /// one backend, each call under one lock (gpu/serialized_backend.hpp): the CUDA backend takes
  /// one caller at a time, and its stream orders the work of every role anyway.
  std::unique_ptr<gpu::backend> serial_dev;
  std::unique_ptr<model::dense_weights> dense;
  std::unique_ptr<model::transformer> forward;
  /// The expert weights this process's shards hold, for shards to share (null without a device).
  std::shared_ptr<expert_share_index> shares;
  /// How this process's prefix caches and router name KV blocks: keyed with the deployment's
  /// secret (kvcache/hash_key.hpp says where it comes from). Never part of a message.
  std::shared_ptr<const kvcache::block_hasher> block_hasher;

  /// Loads config and dense weights of DIR onto `device`; `progress` gets (layers done,
  /// layers). Blocks are hashed under `block_key`.
  static result<std::shared_ptr<const model_context>> load(const std::string& dir,
                                                           const kvcache::hash_key_bytes& block_key,
                                                           const model::load_progress& progress,
                                                           const gpu::device_choice& device = {});
  /// Only the config: for a coordinator whose roles all run on nodes.
  static result<std::shared_ptr<const model_context>> load_config(
      const std::string& dir, const kvcache::hash_key_bytes& block_key);

  /// This model on `device`: this context when it holds the weights there, else the context of
  /// that device, loaded (with `progress`) at the first ask and kept while this one lives. Made
  /// for the base context of a process; a failure is not kept.
  result<std::shared_ptr<const model_context>> on_device(
      const gpu::device_choice& device, const model::load_progress& progress = {}) const;
  /// Bytes of one weight element as the checkpoint stores them (2 for bfloat16 and float16, 4
  /// for float32 or when the checkpoint cannot be opened here), for estimates of device memory.
  size_t weight_element_bytes() const;

  /// The draft model in `draft_dir` (model/draft_model.hpp), checked against this model and
  /// loaded onto `dev` the first time a decode worker here asks for it; later asks share it.
  /// Needs the weights (not a config-only context). A failure is not kept: the next ask tries
  /// again.
  result<std::shared_ptr<const model::loaded_model>> draft(const std::string& draft_dir) const;

 private:
  static result<std::shared_ptr<model_context>> load_on(
      const std::string& dir, std::shared_ptr<const kvcache::block_hasher> hasher,
      const model::load_progress& progress, const gpu::device_choice& device);

  mutable std::mutex device_mutex_;
  /// The contexts of other devices, by device: as many as the roles here use, in practice one.
  mutable std::map<gpu::device_choice, std::shared_ptr<const model_context>> devices_;
  mutable std::mutex draft_mutex_;
  /// Draft models by directory: as many as the manifest names, in practice one.
  mutable std::map<std::string, std::shared_ptr<const model::loaded_model>> drafts_;
};

}  // namespace brigade::actors

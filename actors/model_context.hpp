// What every role actor in one process shares: the mapped checkpoint, its config, the backend
// and the dense weights (read-only after loading). Expert weights belong to expert shards.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "kvcache/block_hash.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/loaded_model.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace brigade::actors {

class expert_share_index;

struct model_context {
  std::string dir;
  model::model_config config;
  std::unique_ptr<model::checkpoint> ckpt;
  std::unique_ptr<gpu::backend> dev;
  /// The same device, computing on the calling thread only. Expert shards use it: they run
  /// side by side, so the parallelism comes from the shards, and a thread pool inside each one
  /// would only oversubscribe the cores.
  std::unique_ptr<gpu::backend> serial_dev;
  std::unique_ptr<model::dense_weights> dense;
  std::unique_ptr<model::transformer> forward;
  /// The expert weights this process's shards hold, for shards to share (null without a device).
  std::shared_ptr<expert_share_index> shares;
  /// How this process's prefix caches and router name KV blocks: keyed with the deployment's
  /// secret (kvcache/hash_key.hpp says where it comes from). Never part of a message.
  std::shared_ptr<const kvcache::block_hasher> block_hasher;

  /// Loads config and dense weights of DIR; `progress` gets (layers done, layers). Blocks are
  /// hashed under `block_key`.
  static result<std::shared_ptr<const model_context>> load(const std::string& dir,
                                                           const kvcache::hash_key_bytes& block_key,
                                                           const model::load_progress& progress);
  /// Only the config: for a coordinator whose roles all run on nodes.
  static result<std::shared_ptr<const model_context>> load_config(
      const std::string& dir, const kvcache::hash_key_bytes& block_key);

  /// The draft model in `draft_dir` (model/draft_model.hpp), checked against this model and
  /// loaded onto `dev` the first time a decode worker here asks for it; later asks share it.
  /// Needs the weights (not a config-only context). A failure is not kept: the next ask tries
  /// again.
  result<std::shared_ptr<const model::loaded_model>> draft(const std::string& draft_dir) const;

 private:
  mutable std::mutex draft_mutex_;
  /// Draft models by directory: as many as the manifest names, in practice one.
  mutable std::map<std::string, std::shared_ptr<const model::loaded_model>> drafts_;
};

}  // namespace brigade::actors

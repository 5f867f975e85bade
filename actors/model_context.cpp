#include "actors/model_context.hpp"

#include "actors/expert_share_index.hpp"
#include "common/thread_pool.hpp"
#include "model/draft_model.hpp"

namespace brigade::actors {

result<std::shared_ptr<const model_context>> model_context::load(
    const std::string& dir, const kvcache::hash_key_bytes& block_key,
    const model::load_progress& progress) {
  auto ctx = std::make_shared<model_context>();
  ctx->dir = dir;
  ctx->block_hasher = std::make_shared<const kvcache::block_hasher>(block_key);
  auto config = model::load_config(dir);
  if (!config) return config.err();
  ctx->config = config.value();
  auto ck = model::checkpoint::open(dir);
  if (!ck) return ck.err();
  ctx->ckpt = std::move(ck.value());
  ctx->dev = gpu::make_cpu_backend();
  static thread_pool caller_only(1);
  ctx->serial_dev = gpu::make_cpu_backend(&caller_only);
  ctx->shares = std::make_shared<expert_share_index>();
  auto dense = model::dense_weights::load(*ctx->ckpt, ctx->config, *ctx->dev, progress);
  if (!dense) return dense.err();
  ctx->dense = std::move(dense.value());
  ctx->forward = std::make_unique<model::transformer>(ctx->config, *ctx->dev, *ctx->dense);
  return std::shared_ptr<const model_context>(std::move(ctx));
}

result<std::shared_ptr<const model_context>> model_context::load_config(
    const std::string& dir, const kvcache::hash_key_bytes& block_key) {
  auto ctx = std::make_shared<model_context>();
  ctx->dir = dir;
  ctx->block_hasher = std::make_shared<const kvcache::block_hasher>(block_key);
  auto config = model::load_config(dir);
  if (!config) return config.err();
  ctx->config = config.value();
  return std::shared_ptr<const model_context>(std::move(ctx));
}

result<std::shared_ptr<const model::loaded_model>> model_context::draft(
    const std::string& draft_dir) const {
  if (!dev) return error(errc::internal, "no model is loaded here to draft for");
  std::lock_guard<std::mutex> lock(draft_mutex_);
  if (auto it = drafts_.find(draft_dir); it != drafts_.end()) return it->second;
  auto loaded = model::draft_model::load(draft_dir, config, dir, *dev);
  if (!loaded) return loaded.err();
  drafts_.emplace(draft_dir, loaded.value());
  return loaded.value();
}

}  // namespace brigade::actors

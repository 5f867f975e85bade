#include "actors/model_context.hpp"

#include "actors/expert_share_index.hpp"
#include "actors/spawn_checks.hpp"
#include "common/thread_pool.hpp"
#include "gpu/serialized_backend.hpp"
#include "model/draft_model.hpp"

namespace brigade::actors {
namespace {

// The backend a context computes with, and the expert shards' serial view of it.
status make_backends(model_context& ctx, const gpu::device_choice& device) {
  if (!device.cuda) {
    ctx.dev = gpu::make_cpu_backend();
    static thread_pool caller_only(1);
    ctx.serial_dev = gpu::make_cpu_backend(&caller_only);
    return ok_status();
  }
  auto made = gpu::make_backend(device);
  if (!made) return made.err();
  std::shared_ptr<gpu::backend> shared = std::move(made.value());
  auto lock = std::make_shared<std::mutex>();
  ctx.dev = gpu::make_serialized_backend(shared, lock);
  ctx.serial_dev = gpu::make_serialized_backend(shared, lock);
  return ok_status();
}

}  // namespace

result<std::shared_ptr<model_context>> model_context::load_on(
    const std::string& dir, std::shared_ptr<const kvcache::block_hasher> hasher,
    const model::load_progress& progress, const gpu::device_choice& device) {
  auto ctx = std::make_shared<model_context>();
  ctx->dir = dir;
  ctx->device = device;
  ctx->block_hasher = std::move(hasher);
  auto config = model::load_config(dir);
  if (!config) return config.err();
  ctx->config = config.value();
  auto ck = model::checkpoint::open(dir);
  if (!ck) return ck.err();
  ctx->ckpt = std::move(ck.value());
  if (status made = make_backends(*ctx, device); !made) return made.err();
  ctx->shares = std::make_shared<expert_share_index>();
  auto dense = model::dense_weights::load(*ctx->ckpt, ctx->config, *ctx->dev, progress);
  if (!dense) return dense.err();
  ctx->dense = std::move(dense.value());
  ctx->forward = std::make_unique<model::transformer>(ctx->config, *ctx->dev, *ctx->dense);
  return ctx;
}

result<std::shared_ptr<const model_context>> model_context::load(
    const std::string& dir, const kvcache::hash_key_bytes& block_key,
    const model::load_progress& progress, const gpu::device_choice& device) {
  auto ctx =
      load_on(dir, std::make_shared<const kvcache::block_hasher>(block_key), progress, device);
  if (!ctx) return ctx.err();
  return std::shared_ptr<const model_context>(std::move(ctx.value()));
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

result<std::shared_ptr<const model_context>> model_context::on_device(
    const gpu::device_choice& wanted, const model::load_progress& progress) const {
  if (dev && wanted == device) return shared_from_this();
  std::lock_guard<std::mutex> lock(device_mutex_);
  if (auto it = devices_.find(wanted); it != devices_.end()) return it->second;
  auto loaded = load_on(dir, block_hasher, progress, wanted);
  if (!loaded) return loaded.err();
  std::shared_ptr<const model_context> ctx = std::move(loaded.value());
  devices_.emplace(wanted, ctx);
  return ctx;
}

size_t model_context::weight_element_bytes() const {
  return checkpoint_element_bytes(dir);
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

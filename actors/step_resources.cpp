#include "actors/step_resources.hpp"
#include "model/kv_layout.hpp"

namespace brigade::actors {

step_resources make_step_resources(const model_context& ctx, int kv_tokens, int block_tokens,
                                   int max_rows, gpu::dtype element) {
  const auto& c = ctx.config;
  const gpu::kv_layout layout =
      model::kv_layout_for(c, blocks_for(kv_tokens, block_tokens), block_tokens, element);
  step_resources r;
  r.kv = ctx.dev->make_kv(layout);
  r.pool = std::make_unique<kvcache::block_pool>(layout.blocks);
  r.ws = std::make_unique<model::workspace>(c, *ctx.dev, max_rows);
  r.driver = std::make_unique<model::step_driver>(*ctx.forward, *r.kv, *r.ws);
  return r;
}

}  // namespace brigade::actors

#include "actors/step_resources.hpp"

namespace brigade::actors {

step_resources make_step_resources(const model_context& ctx, int kv_tokens, int block_tokens,
                                   int max_rows) {
  const auto& c = ctx.config;
  gpu::kv_layout layout;
  layout.layers = c.num_layers;
  layout.blocks = blocks_for(kv_tokens, block_tokens);
  layout.block_tokens = block_tokens;
  layout.kv_heads = c.num_kv_heads;
  layout.head_dim = c.head_dim;
  step_resources r;
  r.kv = ctx.dev->make_kv(layout);
  r.pool = std::make_unique<kvcache::block_pool>(layout.blocks);
  r.ws = std::make_unique<model::workspace>(c, *ctx.dev, max_rows);
  r.driver = std::make_unique<model::step_driver>(*ctx.forward, *r.kv, *r.ws);
  return r;
}

}  // namespace brigade::actors

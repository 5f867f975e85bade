// The shape of a model's paged KV cache, as every role that holds KV makes it.
#pragma once

#include "gpu/backend.hpp"
#include "model/config.hpp"

namespace brigade::model {

/// `blocks` blocks of `block_tokens` slots for model `c` (one row per slot when its values alias
/// its keys).
inline gpu::kv_layout kv_layout_for(const model_config& c, int blocks, int block_tokens) {
  gpu::kv_layout layout;
  layout.layers = c.num_layers;
  layout.blocks = blocks;
  layout.block_tokens = block_tokens;
  layout.kv_heads = c.num_kv_heads;
  layout.head_dim = c.head_dim;
  layout.values_alias_keys = c.kv_values_alias_keys();
  return layout;
}

}  // namespace brigade::model

// The shape of a model's paged KV cache, as every role that holds KV makes it, and the KV element
// types a deployment may choose.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/config.hpp"

namespace brigade::model {

/// `blocks` blocks of `block_tokens` slots for model `c` (one row per slot when its values alias
/// its keys), elements of type `element` (f32 or bf16).
inline gpu::kv_layout kv_layout_for(const model_config& c, int blocks, int block_tokens,
                                    gpu::dtype element = gpu::dtype::f32) {
  gpu::kv_layout layout;
  layout.layers = c.num_layers;
  layout.blocks = blocks;
  layout.block_tokens = block_tokens;
  layout.kv_heads = c.num_kv_heads;
  layout.head_dim = c.head_dim;
  layout.values_alias_keys = c.kv_values_alias_keys();
  layout.element = element;
  return layout;
}

/// How manifests, flags and messages spell a KV element type: "f32" or "bf16".
inline const char* kv_dtype_name(gpu::dtype element) {
  return element == gpu::dtype::bf16 ? "bf16" : "f32";
}

/// "f32" or "bf16" as a KV element type; anything else is refused naming `field` and the value.
inline result<gpu::dtype> parse_kv_dtype(std::string_view text, std::string_view field) {
  if (text == "f32") return gpu::dtype::f32;
  if (text == "bf16") return gpu::dtype::bf16;
  return error(errc::invalid_argument,
               std::string(field) + " is '" + std::string(text) + "', not one of f32, bf16");
}

/// The element type a checked name stands for (parse_kv_dtype refuses any other name first).
inline gpu::dtype kv_element(std::string_view checked_name) {
  return checked_name == "bf16" ? gpu::dtype::bf16 : gpu::dtype::f32;
}

}  // namespace brigade::model

// The shape of the small random MoE checkpoint that most tests run on: 2 layers, hidden 64,
// 4 query heads and 2 KV heads of 16 dims, 8 experts top-2 of 32, vocabulary 512. Small enough
// to write and run in milliseconds, with every part of the forward pass (GQA, top-k routing,
// several experts a token) present.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_writer.hpp"

namespace brigade::testing {

inline model::model_spec small_model_spec(uint64_t seed, const std::string& family = "qwen3_moe") {
  model::model_spec spec;
  spec.family = family;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.experts = 8;
  spec.top_k = 2;
  spec.moe_inter = 32;
  spec.vocab = 512;
  spec.seed = seed;
  if (family == "deepseek_v3") {
    // Latent attention with a low-rank query, 4 expert groups of which 2 are kept, a shared
    // expert, and a dense first layer before two MoE layers.
    spec.layers = 3;
    spec.q_lora_rank = 24;
    spec.kv_lora_rank = 16;
    spec.qk_nope_head_dim = 16;
    spec.qk_rope_head_dim = 8;
    spec.v_head_dim = 16;
    spec.groups = 4;
    spec.top_groups = 2;
    spec.first_dense = 1;
    spec.dense_inter = 128;
  }
  return spec;
}

}  // namespace brigade::testing

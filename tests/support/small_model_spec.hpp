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
  return spec;
}

}  // namespace brigade::testing

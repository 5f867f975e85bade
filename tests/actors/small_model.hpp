// The small random MoE checkpoint the topology tests run on: 2 layers, hidden 64, 4 query heads
// and 2 KV heads of 16 dims, 8 experts top-2 of 32, vocabulary 512.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "model/model_writer.hpp"
#include "support/temp_dir.hpp"

namespace brigade::testing {

struct small_model {
  temp_dir dir;
  small_model(const std::string& tag, uint64_t seed) : dir{tag} {
    model::model_spec spec;
    spec.family = "qwen3_moe";
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
    REQUIRE(model::write_random_model(spec, dir.path()).ok());
  }
};

}  // namespace brigade::testing

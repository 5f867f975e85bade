// What a cached token costs with multi-head latent attention beside grouped-query attention: a
// deepseek_v3 model and a qwen3_moe model of about the same size, each served with its prefix
// cache demoting to a KV store, per token of KV in the model's layout (the pool, the hand-off
// from prefill to decode and every store tier carry the same bytes) and as the store holds it.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "common/result.hpp"

namespace brigade::bench {

struct kv_footprint_options {
  int layers = 4;
  int hidden = 1024;
  int moe_inter = 1024;
  int prompt_tokens = 512;
  int prompts = 4;
};

/// One row per model: {family, params, kv_bytes_per_token, store_blocks, store_bytes,
/// store_bytes_per_token}, and the MLA / GQA ratio.
result<nlohmann::json> measure_kv_footprint(const kv_footprint_options& o);

void print_kv_footprint(const nlohmann::json& j);

}  // namespace brigade::bench

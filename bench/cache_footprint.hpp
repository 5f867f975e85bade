// What a cached token costs with multi-head latent attention beside grouped-query attention: a
// deepseek_v3 model and a qwen3_moe model of about the same size, each served with its prefix
// cache demoting to a KV store, per token of KV in the model's layout (the pool, the hand-off
// from prefill to decode and every store tier carry the same bytes) and as the store holds it,
// with an f32 and a bf16 KV cache; and the engine's decode speed at a long context with each.
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

/// One row per model and KV type: {family, kv_dtype, params, kv_bytes_per_token, store_blocks,
/// store_bytes, store_bytes_per_token}, the MLA / GQA ratio (f32) and the bf16 / f32 ratio
/// (qwen3_moe).
result<nlohmann::json> measure_kv_footprint(const kv_footprint_options& o);

void print_kv_footprint(const nlohmann::json& j);

struct kv_decode_options {
  int layers = 4;
  int hidden = 1024;
  int moe_inter = 1024;
  int prompt_tokens = 2048;  ///< The context each sequence decodes at.
  int batch = 8;             ///< Sequences decoding together.
  int decode_steps = 32;     ///< Timed decode steps after every prompt's prefill.
};

/// The single-process engine on the qwen3_moe bench model: decode tokens per second of `batch`
/// sequences at a `prompt_tokens` context, with an f32 and then a bf16 KV cache. Rows
/// {kv_dtype, kv_bytes, decode_tokens, decode_s, tokens_per_s}, and the bf16 / f32 speed ratio.
result<nlohmann::json> measure_kv_decode(const kv_decode_options& o);

void print_kv_decode(const nlohmann::json& j);

}  // namespace brigade::bench

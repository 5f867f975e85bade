// Writes small random checkpoints in exactly the Hugging Face format: config.json,
// model.safetensors and a byte-level tokenizer. The embedded default model is made this way at
// build time, so nothing is ever downloaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

struct model_spec {
  std::string family = "qwen3_moe";  ///< Hugging Face model_type.
  int layers = 4;
  int hidden = 256;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 64;
  int experts = 16;
  int top_k = 4;
  int moe_inter = 128;
  int dense_inter = 512;  ///< Dense MLP layers (mlp_only_layers) and dense families.
  int shared_inter = 0;   ///< Qwen2-MoE shared expert; 0 picks 2 x moe_inter for qwen2_moe.
  int vocab = 2048;
  int max_positions = 4096;
  std::vector<int> mlp_only_layers;
  bool norm_topk_prob = true;
  bool tie_embeddings = false;
  std::string dtype = "bfloat16";  ///< float32, bfloat16 or float16.
  // deepseek_v3 only (its head sizes come from these, not head_dim and kv_heads).
  int q_lora_rank = 0;  ///< 0 writes a plain q_proj (config null).
  int kv_lora_rank = 32;
  int qk_nope_head_dim = 32;
  int qk_rope_head_dim = 16;
  int v_head_dim = 32;
  int shared_experts = 1;  ///< n_shared_experts
  int groups = 1;          ///< n_group
  int top_groups = 1;      ///< topk_group
  double routed_scaling = 2.5;
  int first_dense = 1;  ///< first_k_dense_replace
  /// YaRN rope scaling: factor 0 writes rope_scaling null.
  double yarn_factor = 0.0;
  int yarn_original_max_positions = 256;
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;
  double yarn_mscale = 1.0;
  double yarn_mscale_all_dim = 1.0;
  uint64_t seed = 0;
};

/// Checks a spec and names the first bad field.
status validate(const model_spec& spec);
/// Creates DIR if needed and writes the checkpoint into it.
status write_random_model(const model_spec& spec, const std::string& dir);

}  // namespace brigade::model

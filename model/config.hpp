// A model's configuration, read from a Hugging Face config.json with its exact field names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

/// The architectures brigade runs. Families differ only in the options below.
enum class family { qwen3_moe, mixtral, olmoe, qwen2_moe, qwen3, qwen2, llama, deepseek_v3 };

/// How queries and keys are normalised before RoPE.
enum class qk_norm_kind {
  none,
  per_head,  ///< Qwen3: RMSNorm over each head's head_dim values.
  whole,     ///< OLMoE: RMSNorm over the whole projection (all heads at once).
};

/// DeepSeek-V3's multi-head latent attention. Queries go through an optional low-rank
/// projection; keys and values are up-projected from a per-token latent of kv_lora_rank values,
/// and only qk_rope_head_dim of each head's query and key dimensions get rotary positions (the key
/// part shared by all heads).
struct mla_dims {
  int q_lora_rank = 0;  ///< 0: a plain q_proj.
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  /// The cached row of a token: its normalised latent, then its rotated rope key.
  int cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

/// YaRN rope scaling (rope_scaling type "yarn"), as DeepSeek-V3 configures it.
struct yarn_scaling {
  bool enabled = false;
  double factor = 1.0;
  int original_max_positions = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
};

struct model_config {
  std::string model_type;  ///< As in config.json ("qwen3_moe", ...).
  family fam = family::qwen3_moe;

  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_positions = 0;  ///< max_position_embeddings (or sliding_window when smaller).
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  // Attention options of the family.
  qk_norm_kind qk_norm = qk_norm_kind::none;
  bool qkv_bias = false;
  float clip_qkv = 0.0f;   ///< OLMoE: clamp q, k and v to [-clip, clip]; 0 when off.
  int sliding_window = 0;  ///< Mistral/Mixtral: attend to the last N positions; 0 when off.

  // Mixture of experts; num_experts == 0 means a dense model.
  int num_experts = 0;
  int top_k = 0;
  int expert_intermediate = 0;  ///< moe_intermediate_size (Qwen) or intermediate_size.
  bool norm_topk_prob = false;
  int shared_expert_intermediate = 0;  ///< Qwen2-MoE's shared expert; 0 when absent.
  int dense_intermediate = 0;          ///< intermediate_size of dense MLP layers.
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  // DeepSeek-V3 (deepseek_v3). With MLA the KV cache holds one row of mla.cache_dim() values per
  // token and layer: num_kv_heads is 1 and head_dim is that width.
  mla_dims mla;
  yarn_scaling yarn;
  bool sigmoid_router = false;      ///< Sigmoid scores with e_score_correction_bias (noaux_tc).
  int expert_groups = 1;            ///< n_group: group-limited routing.
  int topk_groups = 1;              ///< topk_group.
  float routed_scaling = 1.0f;      ///< routed_scaling_factor.
  bool shared_expert_gated = true;  ///< Qwen2-MoE gates its shared expert; DeepSeek-V3 does not.

  std::vector<int> eos_token_ids;
  std::optional<int> bos_token_id;

  bool is_moe() const { return num_experts > 0; }
  /// True when `layer` has experts; false when it has a dense MLP.
  bool is_moe_layer(int layer) const;
  /// The layers with experts, in order: an expert layout's layer i is moe_layers()[i].
  std::vector<int> moe_layers() const;
  /// Approximate parameter counts, for reports.
  double total_params() const;
  double active_params() const;

  /// MLA caches one row per token and layer that attention reads as both key and value, so the
  /// KV cache stores it once.
  bool kv_values_alias_keys() const { return mla.enabled(); }
  /// Rows stored per token and layer: 1 when values alias keys, else 2 (keys and values).
  int kv_planes() const { return kv_values_alias_keys() ? 1 : 2; }
  /// Bytes of KV cache per token over all layers, with elements of `element_bytes` (4 for an f32
  /// cache, 2 for bf16).
  std::uint64_t kv_bytes_per_token(std::uint64_t element_bytes = sizeof(float)) const {
    return static_cast<std::uint64_t>(kv_planes()) * element_bytes *
           static_cast<std::uint64_t>(num_layers) * static_cast<std::uint64_t>(num_kv_heads) *
           static_cast<std::uint64_t>(head_dim);
  }
};

/// Parses config.json text; `source` names the file in error messages.
result<model_config> parse_config(const std::string& text, const std::string& source);
/// Reads DIR/config.json.
result<model_config> load_config(const std::string& dir);

const char* family_name(family f);

}  // namespace brigade::model

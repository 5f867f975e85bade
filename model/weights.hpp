// A model's weights on one backend: the dense part every worker needs, and expert FFNs, which
// expert shards hold a subset of.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"

namespace brigade::model {

/// A SwiGLU feed-forward block: down(silu(gate(x)) * up(x)), gate and up fused in one matrix.
struct ffn_weights {
  std::unique_ptr<gpu::matrix> gate_up;  ///< [2 * inter, hidden]: gate rows, then up rows.
  std::unique_ptr<gpu::matrix> down;     ///< [hidden, inter].
  int inter = 0;

  size_t bytes() const { return gate_up ? gate_up->bytes() + down->bytes() : 0; }
};

/// DeepSeek-V3's latent attention, arranged for the absorbed form (model/latent_attention.cpp):
/// the key up-projection folded into each head's query, the value up-projection applied to each
/// head's attended latent. The rope rows of q and kv_a are stored de-interleaved, so that the
/// backend's rotate-half rope computes the checkpoint's interleaved one.
struct latent_attention_weights {
  std::unique_ptr<gpu::matrix> q_a;        ///< [q_lora_rank, hidden]; null without q_lora_rank.
  std::unique_ptr<gpu::buffer> q_a_norm;   ///< [q_lora_rank]
  std::unique_ptr<gpu::matrix> q_b;        ///< [heads * qk_head_dim, q_lora_rank or hidden]
  std::unique_ptr<gpu::matrix> kv_a;       ///< [kv_lora_rank + qk_rope_head_dim, hidden]
  std::unique_ptr<gpu::buffer> kv_a_norm;  ///< [kv_lora_rank]
  /// Per head, [cache_dim, qk_head_dim]: the head's query (nope, rope) to its query against the
  /// cached row (latent, rope): the key up-projection transposed, then the identity.
  std::vector<std::unique_ptr<gpu::matrix>> q_absorb;
  /// Per head, [v_head_dim, kv_lora_rank]: the value up-projection.
  std::vector<std::unique_ptr<gpu::matrix>> v_up;
};

struct attention_weights {
  std::unique_ptr<gpu::matrix> qkv;  ///< q, k and v projections stacked: one matmul.
  std::unique_ptr<gpu::buffer> qkv_bias;
  std::unique_ptr<gpu::matrix> o;
  std::unique_ptr<gpu::buffer> q_norm;
  std::unique_ptr<gpu::buffer> k_norm;
  latent_attention_weights latent;  ///< DeepSeek-V3 only; qkv is null then.
};

struct layer_weights {
  std::unique_ptr<gpu::buffer> input_norm;
  std::unique_ptr<gpu::buffer> post_norm;
  attention_weights attn;
  std::unique_ptr<gpu::matrix> router;  ///< MoE layers only.
  std::vector<float> router_bias;       ///< DeepSeek-V3's e_score_correction_bias (host).
  ffn_weights shared;                   ///< Qwen2-MoE's shared expert.
  std::unique_ptr<gpu::matrix> shared_gate;
  ffn_weights dense;  ///< Dense layers only.
};

/// Called during loading with bytes done and bytes in all.
using load_progress = std::function<void(size_t done_bytes, size_t total_bytes)>;

/// Everything but the routed experts.
struct dense_weights {
  std::unique_ptr<gpu::matrix> embed;
  std::unique_ptr<gpu::matrix> lm_head;  ///< Null when tied to embed.
  std::unique_ptr<gpu::buffer> final_norm;
  std::unique_ptr<gpu::buffer> rope_cos;  ///< [max_positions, rotary dims / 2]
  std::unique_ptr<gpu::buffer> rope_sin;
  std::vector<layer_weights> layers;

  const gpu::matrix& output_matrix() const { return lm_head ? *lm_head : *embed; }

  static result<std::unique_ptr<dense_weights>> load(const checkpoint& ck, const model_config& c,
                                                     gpu::backend& dev,
                                                     const load_progress& progress = {});
};

/// Routed expert FFNs held by one worker, keyed by (layer, logical expert).
class expert_bank {
 public:
  using key = std::pair<int, int>;

  /// Loads the listed experts; `all_experts` loads every expert of every MoE layer.
  static result<std::unique_ptr<expert_bank>> load(const checkpoint& ck, const model_config& c,
                                                   gpu::backend& dev, const std::vector<key>& which,
                                                   const load_progress& progress = {});
  static std::vector<key> all_experts(const model_config& c);
  /// Loads one expert's weights (used when a shard takes over a slot).
  static result<ffn_weights> load_one(const checkpoint& ck, const model_config& c,
                                      gpu::backend& dev, int layer, int expert);

  const ffn_weights* find(int layer, int expert) const;
  void insert(int layer, int expert, ffn_weights w) { experts_[{layer, expert}] = std::move(w); }
  void erase(int layer, int expert) { experts_.erase({layer, expert}); }
  size_t size() const { return experts_.size(); }
  size_t bytes() const;

 private:
  std::map<key, ffn_weights> experts_;
};

/// Loads DeepSeek-V3's latent attention of layer `l` (model/latent_attention.cpp).
status load_latent_attention(const checkpoint& ck, const model_config& c, gpu::backend& dev, int l,
                             latent_attention_weights& w);

/// Loads a SwiGLU block whose three projections are named by `name(part)`.
result<ffn_weights> load_ffn(const checkpoint& ck, gpu::backend& dev,
                             const std::function<std::string(const std::string&)>& name, int hidden,
                             int inter);

}  // namespace brigade::model

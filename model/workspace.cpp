#include "model/workspace.hpp"

#include <algorithm>

namespace brigade::model {

workspace::workspace(const model_config& c, gpu::backend& dev, int max_tokens)
    : max_tokens_(max_tokens) {
  const int t = max_tokens;
  const int hidden = c.hidden_size;
  const int widest =
      std::max({c.expert_intermediate, c.dense_intermediate, c.shared_expert_intermediate, 1});
  x = dev.alloc(t, hidden);
  h = dev.alloc(t, hidden);
  int qkv_cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  if (c.mla.enabled()) {
    const mla_dims& m = c.mla;
    qkv_cols = std::max(qkv_cols, c.num_heads * m.qk_head_dim() + m.cache_dim() + m.q_lora_rank);
    latent = dev.alloc(t, c.num_heads * (m.cache_dim() + m.v_head_dim));
  }
  qkv = dev.alloc(t, qkv_cols);
  attn = dev.alloc(t, c.num_heads * c.head_dim);
  proj = dev.alloc(t, hidden);
  const int expert_rows = c.is_moe() ? std::max(t, std::min(t * c.top_k, expert_group_rows)) : t;
  gate_up = dev.alloc(expert_rows, 2 * widest);
  inter = dev.alloc(expert_rows, widest);
  if (c.is_moe()) {
    router = dev.alloc(t, c.num_experts);
    expert_out = dev.alloc(t * c.top_k, hidden);
    group_in = dev.alloc(expert_rows, hidden);
    group_out = dev.alloc(expert_rows, hidden);
    if (c.shared_expert_intermediate > 0) {
      shared_out = dev.alloc(t, hidden);
      if (c.shared_expert_gated) shared_gate = dev.alloc(t, 1);
    }
  }
}

}  // namespace brigade::model

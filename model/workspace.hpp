// Activation buffers one worker reuses step after step, sized for its largest step.
#pragma once

#include "gpu/backend.hpp"
#include "model/config.hpp"

namespace brigade::model {

class workspace {
 public:
  workspace(const model_config& c, gpu::backend& dev, int max_tokens);

  int max_tokens() const { return max_tokens_; }

  /// The most routed rows a layer's experts run in one batch (run_local_experts). At decode a
  /// layer's experts get a row or a few each: batched, their matmuls cost one hand-off to the
  /// thread pool instead of one each (+3-10% decode tokens/s at batch 1-32 on the 2-core VM).
  /// Past about 128 rows the batch's scratch leaves L2 and prefill slowed (0.90-0.94x at 512
  /// and 1024 rows).
  static constexpr int expert_group_rows = 128;

  gpu::activation x;           ///< [T, hidden] the residual stream.
  gpu::activation h;           ///< [T, hidden] normalised input of a sublayer.
  gpu::activation qkv;         ///< [T, (heads + 2 * kv_heads) * head_dim]
  gpu::activation attn;        ///< [T, heads * head_dim]
  gpu::activation proj;        ///< [T, hidden] a sublayer's output before the residual add.
  gpu::activation router;      ///< [T, experts]
  gpu::activation expert_out;  ///< [T * top_k, hidden] one row per (token, choice).
  gpu::activation
      group_in;  ///< [E, hidden] rows routed to experts, E = max(T, min(T * top_k, 128))
  gpu::activation group_out;    ///< [E, hidden]
  gpu::activation gate_up;      ///< [E, 2 * largest intermediate]
  gpu::activation inter;        ///< [E, largest intermediate]
  gpu::activation shared_out;   ///< [T, hidden]
  gpu::activation shared_gate;  ///< [T, 1]
  /// DeepSeek-V3: [T, heads * (cache_dim + v_head_dim)] the absorbed queries, then each head's
  /// values (model/latent_attention.cpp).
  gpu::activation latent;
  /// [rows, vocab] the logits of a step, grown to the most rows a step has asked for: allocating
  /// them per step cost fresh pages (and their faults) at every step.
  gpu::activation logits;

 private:
  int max_tokens_;
};

}  // namespace brigade::model

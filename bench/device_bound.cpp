#include "bench/device_bound.hpp"

#include <algorithm>
#include <cmath>

namespace brigade::bench {
namespace {

// Weights of one layer's attention projections.
double attention_params(const model::model_config& c) {
  const double h = c.hidden_size;
  if (!c.mla.enabled()) {
    return h * c.head_dim * (2.0 * c.num_heads + 2.0 * c.num_kv_heads);
  }
  const model::mla_dims& d = c.mla;
  const double heads = c.num_heads;
  const double q = d.q_lora_rank > 0 ? h * d.q_lora_rank + d.q_lora_rank * heads * d.qk_head_dim()
                                     : h * heads * d.qk_head_dim();
  const double kv_a = h * (d.kv_lora_rank + d.qk_rope_head_dim);
  const double kv_b = d.kv_lora_rank * heads * (d.qk_nope_head_dim + d.v_head_dim);
  const double o = heads * d.v_head_dim * h;
  return q + kv_a + kv_b + o;
}

// Weights of one routed expert (gate, up and down).
double expert_params(const model::model_config& c) {
  return 3.0 * c.hidden_size * c.expert_intermediate;
}

// The matrix weights a step reads once whatever its batch: everything but the routed experts
// and the embedding rows.
double shared_params(const model::model_config& c) {
  const double h = c.hidden_size;
  double total = static_cast<double>(c.vocab_size) * h;  // the output head
  for (int l = 0; l < c.num_layers; ++l) {
    total += attention_params(c);
    if (!c.is_moe_layer(l)) {
      total += 3.0 * h * c.dense_intermediate;
      continue;
    }
    total += h * c.num_experts + 3.0 * h * c.shared_expert_intermediate;
    if (c.shared_expert_gated && c.shared_expert_intermediate > 0) total += h;
  }
  return total;
}

double moe_layer_count(const model::model_config& c) {
  return static_cast<double>(c.moe_layers().size());
}

// Attention's score and weighted-value dims per head.
double attention_dims(const model::model_config& c) {
  return c.mla.enabled() ? c.mla.qk_head_dim() + c.mla.v_head_dim : 2.0 * c.head_dim;
}

}  // namespace

double active_weight_bytes_per_token(const model::model_config& c, size_t element_bytes) {
  const double params =
      shared_params(c) + c.hidden_size + moe_layer_count(c) * c.top_k * expert_params(c);
  return params * static_cast<double>(element_bytes);
}

double expected_experts_read(const model::model_config& c, int batch) {
  if (!c.is_moe()) return 0.0;
  const double e = c.num_experts;
  const double picked = std::min(1.0, c.top_k / e);
  return e * (1.0 - std::pow(1.0 - picked, batch));
}

decode_step_reads decode_step_bytes(const model::model_config& c, size_t element_bytes,
                                    size_t kv_element_bytes, int batch, int context_tokens) {
  decode_step_reads r;
  const double params = shared_params(c) + static_cast<double>(batch) * c.hidden_size +
                        moe_layer_count(c) * expected_experts_read(c, batch) * expert_params(c);
  r.weight_bytes = params * static_cast<double>(element_bytes);
  r.kv_bytes = static_cast<double>(batch) * context_tokens *
               static_cast<double>(c.kv_bytes_per_token(kv_element_bytes));
  return r;
}

double flops_per_token(const model::model_config& c, double context_tokens) {
  const double matrix = shared_params(c) + moe_layer_count(c) * c.top_k * expert_params(c);
  const double attention =
      2.0 * c.num_layers * static_cast<double>(c.num_heads) * attention_dims(c) * context_tokens;
  return 2.0 * matrix + attention;
}

throughput_bound decode_bound(const model::model_config& c, size_t element_bytes,
                              size_t kv_element_bytes, int batch, int context_tokens,
                              const device_peaks& peaks) {
  const decode_step_reads reads =
      decode_step_bytes(c, element_bytes, kv_element_bytes, batch, context_tokens);
  const double by_bandwidth = batch * peaks.bandwidth_gb_per_s * 1e9 / reads.total();
  const double by_flops = peaks.bf16_tflop_per_s * 1e12 / flops_per_token(c, context_tokens);
  return {std::min(by_bandwidth, by_flops), by_bandwidth <= by_flops};
}

double prefill_flop_bound_tokens_per_s(const model::model_config& c, int prompt_tokens,
                                       const device_peaks& peaks) {
  const double mean_context = (prompt_tokens + 1) / 2.0;
  return peaks.bf16_tflop_per_s * 1e12 / flops_per_token(c, mean_context);
}

}  // namespace brigade::bench

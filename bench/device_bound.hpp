// The bounds `brigade bench engine --device cuda:N` holds its figures against: what the device's
// memory bandwidth allows decode and what its bf16 FLOP rate allows prefill, computed from the
// model's config (not measured: the device's datasheet figures come in as device_peaks).
//
// Decode at batch B reads, per step, the weights every token shares once (attention, routers,
// shared experts, dense MLPs, the output head), B embedding rows, the routed experts the B tokens
// pick (top_k per MoE layer at batch 1; E(1 - (1 - top_k/E)^B) expected under uniform routing at
// batch B), and every sequence's KV. Step bytes over the bandwidth is the least time a step can
// take; B tokens over that time is the bound, capped by the FLOP bound of B tokens. Prefill of a
// T-token prompt is bound by its FLOPs: two per weight a token multiplies by, plus attention's
// scores and weighted values over (T + 1) / 2 positions on average (causal).
#pragma once

#include <cstddef>

#include "model/config.hpp"

namespace brigade::bench {

/// A device's datasheet peaks. The defaults are the H200's: HBM3e at 4.8 TB/s and 989 dense
/// bf16 TFLOP/s.
struct device_peaks {
  double bandwidth_gb_per_s = 4800.0;  ///< Memory bandwidth, 1e9 bytes per second.
  double bf16_tflop_per_s = 989.0;     ///< Dense bf16 tensor FLOPs, 1e12 per second.
};

/// Bytes of the weight matrices one token reads at batch 1: attention, the routers, top_k routed
/// experts and the shared experts of each MoE layer, dense MLPs, its embedding row and the output
/// head, at `element_bytes` per weight (2 for bf16). Norm vectors and biases are left out.
double active_weight_bytes_per_token(const model::model_config& c, size_t element_bytes);

/// Routed experts a batch of `batch` tokens reads per MoE layer, expected under uniform routing.
double expected_experts_read(const model::model_config& c, int batch);

/// What one decode step of `batch` sequences, each with `context_tokens` in its KV cache, reads.
struct decode_step_reads {
  double weight_bytes = 0;
  double kv_bytes = 0;
  double total() const { return weight_bytes + kv_bytes; }
};

/// The reads of one decode step; KV elements of `kv_element_bytes` (4: the CUDA backend's f32).
decode_step_reads decode_step_bytes(const model::model_config& c, size_t element_bytes,
                                    size_t kv_element_bytes, int batch, int context_tokens);

/// FLOPs of one token with `context_tokens` positions to attend to: 2 per matrix weight it
/// multiplies by (the embedding is a lookup) and attention's 2 x heads x (qk + v dims) per
/// position and layer.
double flops_per_token(const model::model_config& c, double context_tokens);

/// A bound in tokens per second and what sets it.
struct throughput_bound {
  double tokens_per_s = 0;
  bool by_bandwidth = false;  ///< True: memory bandwidth; false: the FLOP rate.
};

/// Decode at `batch`, `context_tokens` per sequence: the lesser of the bandwidth and FLOP bounds.
throughput_bound decode_bound(const model::model_config& c, size_t element_bytes,
                              size_t kv_element_bytes, int batch, int context_tokens,
                              const device_peaks& peaks);

/// Prefill of one `prompt_tokens`-long prompt: the FLOP bound.
double prefill_flop_bound_tokens_per_s(const model::model_config& c, int prompt_tokens,
                                       const device_peaks& peaks);

}  // namespace brigade::bench

// DeepSeek-V3's router as the CUDA kernel takes it: gpu::router_spec with the bias already in
// device memory. Plain data, so host code builds it and kernels read it by value.
#pragma once

namespace brigade::gpu::cuda {

/// Sigmoid scores; the choice by score + bias among the experts of the `top_groups` groups whose
/// two best biased scores sum highest; the weights the unbiased scores, normalised when asked,
/// times `scale` (gpu::router_spec says the same for the host).
struct sigmoid_router {
  int top_k = 1;
  bool normalize = true;
  const float* bias = nullptr;  ///< Device memory, one per expert; null for none.
  int groups = 1;
  int top_groups = 1;
  float scale = 1.0f;
};

/// At most this many groups: the kernel keeps the chosen groups as one 64-bit mask per row.
constexpr int max_router_groups = 64;

}  // namespace brigade::gpu::cuda

// Expert routing kernels (see matmul_kernel.cuh for why kernels live in headers): top-k of the
// router's softmax per token, and the weighted combination of the expert outputs back into the
// residual stream. Both work on one token's row at a time.
#pragma once

#include <cstdint>

#include "gpu/cuda/kernel_support.cuh"
#include "gpu/tensor.hpp"

namespace brigade::gpu::cuda {
namespace {

// Whether expert i is among the first `count` picks of this row. A scan of the picks rather
// than a "ranks below the previous pick" test: that test takes nothing once a probability is
// NaN (every comparison is false), where the CPU backend goes on taking the lowest free index.
__device__ inline bool already_picked(const int32_t* ids, int count, int i) {
  for (int j = 0; j < count; ++j) {
    if (ids[j] == i) return true;
  }
  return false;
}

// One thread per token row. Probabilities are recomputed rather than stored, so any number of
// experts fits; each is the same expression every time, so comparisons are consistent.
__global__ void router_topk_kernel(tensor logits, int top_k, bool normalize, int32_t* experts,
                                   float* weights) {
  for (long long r = first_item(); r < logits.rows; r += item_stride()) {
    const float* l = logits.data + r * logits.stride;
    const int n = logits.cols;
    float max = l[0];
    for (int i = 1; i < n; ++i)
      max = l[i] > max ? l[i] : max;
    float sum = 0.0f;
    for (int i = 0; i < n; ++i)
      sum = sum + expf(l[i] - max);
    int32_t* ids = experts + r * top_k;
    float* w = weights + r * top_k;
    float selected = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      int best = -1;
      float best_p = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float p = expf(l[i] - max) / sum;
        if (already_picked(ids, j, i)) continue;
        if (best < 0 || p > best_p) {
          best = i;
          best_p = p;
        }
      }
      ids[j] = best;
      w[j] = best_p;
      selected = selected + best_p;
    }
    if (normalize) {
      for (int j = 0; j < top_k; ++j)
        w[j] = w[j] / selected;
    }
  }
}

// x[t] += sum_j weights[t*k+j] * y[t*k+j] (j in order) + sigmoid(gate[t]) * shared[t], as one
// fused multiply-add chain per element, the CPU backend's order.
__global__ void combine_kernel(tensor x, tensor y, const float* weights, int k, tensor shared,
                               tensor shared_gate, bool has_shared) {
  const long long items = static_cast<long long>(x.rows) * x.cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long t = item / x.cols;
    const long long c = item % x.cols;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const long long slot = t * k + j;
      acc = fmaf(weights[slot], y.data[slot * y.stride + c], acc);
    }
    if (has_shared) {
      const float g = shared_gate.data[t * shared_gate.stride];
      const float scale = 1.0f / (1.0f + expf(-g));
      acc = fmaf(scale, shared.data[t * shared.stride + c], acc);
    }
    float* out = x.data + t * x.stride + c;
    *out = *out + acc;
  }
}

template <class Launch>
void dispatch_router_topk(const tensor& logits, int top_k, bool normalize, int32_t* experts,
                          float* weights, Launch&& launch) {
  if (logits.rows == 0) return;
  launch(router_topk_kernel, dim3(blocks_for(logits.rows)), dim3(threads_per_block), logits, top_k,
         normalize, experts, weights);
}

/// `shared` and `shared_gate` are both null or both set.
template <class Launch>
void dispatch_combine(const tensor& x, const tensor& y, const float* weights, int k,
                      const tensor* shared, const tensor* shared_gate, Launch&& launch) {
  const long long items = static_cast<long long>(x.rows) * x.cols;
  if (items == 0) return;
  const tensor none{};
  launch(combine_kernel, dim3(blocks_for(items)), dim3(threads_per_block), x, y, weights, k,
         shared ? *shared : none, shared_gate ? *shared_gate : none, shared != nullptr);
}

}  // namespace
}  // namespace brigade::gpu::cuda

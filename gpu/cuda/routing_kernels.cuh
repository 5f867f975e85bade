// Expert routing kernels (see matmul_kernel.cuh for why kernels live in headers): top-k of the
// router's softmax per token, DeepSeek-V3's grouped top-k of sigmoid scores, and the weighted
// combination of the expert outputs back into the residual stream. Both work on one token's row at
// a time.
#pragma once

#include <cstdint>

#include "gpu/cuda/kernel_support.cuh"
#include "gpu/cuda/sigmoid_router.hpp"
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

// Picks up to this many are scanned in a thread-local copy rather than in the output just
// written to global memory, which each scan would read back at global latency.
constexpr int local_picks = 16;

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
    int32_t local[local_picks];
    int32_t* picks = top_k <= local_picks ? local : ids;
    float selected = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      int best = -1;
      float best_p = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float p = expf(l[i] - max) / sum;
        if (already_picked(picks, j, i)) continue;
        if (best < 0 || p > best_p) {
          best = i;
          best_p = p;
        }
      }
      picks[j] = best;
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

// DeepSeek-V3's router (sigmoid_router.hpp), the CPU backend's rule (gpu/cpu/elementwise.cpp)
// step for step, ties to the lower group and the lower expert.
__device__ inline float sigmoid_score(float logit) {
  return 1.0f / (1.0f + expf(-logit));
}

// A group's score: the sum of its two best biased scores (its best alone for a group of one).
__device__ inline float group_score(const float* l, const float* bias, int g, int per_group) {
  float first = -INFINITY, second = -INFINITY;
  for (int i = g * per_group; i < (g + 1) * per_group; ++i) {
    const float v = sigmoid_score(l[i]) + (bias ? bias[i] : 0.0f);
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return per_group > 1 ? first + second : first;
}

// One thread per token row; scores are recomputed rather than stored, as in router_topk_kernel.
__global__ void router_sigmoid_topk_kernel(tensor logits, sigmoid_router spec, int32_t* experts,
                                           float* weights) {
  for (long long r = first_item(); r < logits.rows; r += item_stride()) {
    const float* l = logits.data + r * logits.stride;
    const int n = logits.cols;
    const int per_group = n / spec.groups;
    unsigned long long kept = 0;
    for (int j = 0; j < spec.top_groups; ++j) {
      int best = -1;
      float best_v = 0.0f;
      for (int g = 0; g < spec.groups; ++g) {
        if ((kept >> g) & 1ull) continue;
        const float v = group_score(l, spec.bias, g, per_group);
        if (best < 0 || v > best_v) {
          best = g;
          best_v = v;
        }
      }
      kept |= 1ull << best;
    }
    int32_t* ids = experts + r * spec.top_k;
    float* w = weights + r * spec.top_k;
    int32_t local[local_picks];
    int32_t* picks = spec.top_k <= local_picks ? local : ids;
    float selected = 0.0f;
    for (int j = 0; j < spec.top_k; ++j) {
      int best = -1;
      float best_v = 0.0f;
      for (int i = 0; i < n; ++i) {
        if (!((kept >> (i / per_group)) & 1ull) || already_picked(picks, j, i)) continue;
        const float v = sigmoid_score(l[i]) + (spec.bias ? spec.bias[i] : 0.0f);
        if (best < 0 || v > best_v) {
          best = i;
          best_v = v;
        }
      }
      picks[j] = best;
      ids[j] = best;
      w[j] = sigmoid_score(l[best]);
      selected = selected + w[j];
    }
    for (int j = 0; j < spec.top_k; ++j) {
      if (spec.normalize) w[j] = w[j] / (selected + 1e-20f);
      w[j] = w[j] * spec.scale;
    }
  }
}

// x[t] += sum_j weights[t*k+j] * y[t*k+j] (j in order) + sigmoid(gate[t]) * shared[t], as one
// fused multiply-add chain per element, the CPU backend's order. A shared expert without a gate
// (DeepSeek-V3's) adds with a scale of one: fmaf(1, s, acc) is acc + s rounded once, as the CPU's.
__global__ void combine_kernel(tensor x, tensor y, const float* weights, int k, tensor shared,
                               tensor shared_gate, bool has_shared, bool has_gate) {
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
      float scale = 1.0f;
      if (has_gate) scale = 1.0f / (1.0f + expf(-shared_gate.data[t * shared_gate.stride]));
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

template <class Launch>
void dispatch_router_sigmoid_topk(const tensor& logits, const sigmoid_router& spec,
                                  int32_t* experts, float* weights, Launch&& launch) {
  if (logits.rows == 0) return;
  launch(router_sigmoid_topk_kernel, dim3(blocks_for(logits.rows)), dim3(threads_per_block), logits,
         spec, experts, weights);
}

/// `shared_gate` is null without `shared`, and may be null with it (a shared expert without a
/// gate).
template <class Launch>
void dispatch_combine(const tensor& x, const tensor& y, const float* weights, int k,
                      const tensor* shared, const tensor* shared_gate, Launch&& launch) {
  const long long items = static_cast<long long>(x.rows) * x.cols;
  if (items == 0) return;
  const tensor none{};
  launch(combine_kernel, dim3(blocks_for(items)), dim3(threads_per_block), x, y, weights, k,
         shared ? *shared : none, shared_gate ? *shared_gate : none, shared != nullptr,
         shared_gate != nullptr);
}

}  // namespace
}  // namespace brigade::gpu::cuda

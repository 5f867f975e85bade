// Paged KV write and causal attention kernels (see matmul_kernel.cuh for why kernels live in
// headers).
//
// Attention runs one warp per (token, head) with an online softmax over tiles of 32 positions,
// starting at the first position the token sees (0, or the start of its sliding window). Lane l
// scores position tile + l with a sequential dot product; the tile's maximum and sum are
// butterflies; values are accumulated position by position, each lane owning head_dim / 32
// dimensions. The order of every reduction depends only on the token's own position and window,
// so a token's output never depends on the rest of the batch.
//
// The KV cache holds float32 or bfloat16 (kv_layout::element). A bf16 cache is written rounded to
// nearest even, exactly as the CPU backend rounds (gpu/dtype.hpp), and widened exactly where
// attention reads it, so both backends store the same bits and attend over the same values.
#pragma once

#include <cstdint>

#include "gpu/cuda/device_batch.hpp"
#include "gpu/cuda/kernel_support.cuh"
#include "gpu/dtype.hpp"
#include "gpu/tensor.hpp"

namespace brigade::gpu::cuda {

namespace {

constexpr int dims_per_lane = max_attention_head_dim / 32;
constexpr int attention_warps_per_block = 4;

struct kv_shape {
  int layer;
  int blocks;
  int block_tokens;
  int kv_heads;
  int head_dim;
  dtype element = dtype::f32;  ///< f32, or bf16 stored as its 16 bits

  // Float offset of (block, slot) of this layer; a slot holds every KV head.
  __device__ long long slot_offset(int block, int slot) const {
    const long long row = static_cast<long long>(kv_heads) * head_dim;
    return ((static_cast<long long>(layer) * blocks + block) * block_tokens + slot) * row;
  }
  // The slot offset of `position` in the sequence whose block table starts at `table`.
  __device__ long long position_offset(const int32_t* table, int position) const {
    return slot_offset(table[position / block_tokens], position % block_tokens);
  }
};

// A stored KV element widened to float32, and a float32 narrowed to the stored type.
__device__ inline float kv_load(const float* p) {
  return *p;
}
__device__ inline float kv_load(const unsigned short* p) {
  return widen_bf16(*p);
}
__device__ inline void kv_store(float* p, float v) {
  *p = v;
}
// Round to nearest even; a NaN stays a (quiet) NaN. The same bits as gpu::f32_to_bf16.
__device__ inline void kv_store(unsigned short* p, float v) {
  unsigned bits = __float_as_uint(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    *p = static_cast<unsigned short>((bits >> 16) | 0x40u);
    return;
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  *p = static_cast<unsigned short>(bits >> 16);
}

template <class Element>
__global__ void kv_write_kernel(Element* keys, Element* values, kv_shape s, tensor k, tensor v,
                                device_batch batch) {
  const int row = s.kv_heads * s.head_dim;
  const long long items = static_cast<long long>(batch.tokens) * row;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long t = item / row;
    const int i = static_cast<int>(item % row);
    const int32_t* table = batch.block_ids + batch.block_offsets[batch.token_seq[t]];
    const long long at = s.position_offset(table, batch.positions[t]) + i;
    kv_store(keys + at, k.data[t * k.stride + i]);
    kv_store(values + at, v.data[t * v.stride + i]);
  }
}

struct attention_args {
  const void* keys;  ///< kv.element: float or the bits of a bfloat16
  const void* values;
  kv_shape kv;
  tensor q;
  tensor out;
  device_batch batch;
  int heads;
  float scale;
  int window;
};

// Dimensions of a key a lane loads before it multiplies them: loads in flight together rather
// than one memory latency per dimension.
constexpr int score_batch = 16;

// Score of one key: a sequential fused multiply-add chain over the head's dimensions, in order
// whatever the batching.
template <class Element>
__device__ inline float key_score(const float* q, const Element* key, int head_dim, float scale) {
  float dot = 0.0f;
  int d = 0;
  for (; d + score_batch <= head_dim; d += score_batch) {
    float k[score_batch];
#pragma unroll
    for (int u = 0; u < score_batch; ++u)
      k[u] = kv_load(key + d + u);
#pragma unroll
    for (int u = 0; u < score_batch; ++u)
      dot = fmaf(q[d + u], k[u], dot);
  }
  for (; d < head_dim; ++d)
    dot = fmaf(q[d], kv_load(key + d), dot);
  return dot * scale;
}

template <class Element>
__global__ void __launch_bounds__(attention_warps_per_block * 32)
    attention_kernel(attention_args a) {
  const Element* keys = static_cast<const Element*>(a.keys);
  const Element* values = static_cast<const Element*>(a.values);
  __shared__ float q_shared[attention_warps_per_block][max_attention_head_dim];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const long long item = static_cast<long long>(blockIdx.x) * attention_warps_per_block + warp;
  if (item >= static_cast<long long>(a.batch.tokens) * a.heads) return;  // uniform per warp
  const int t = static_cast<int>(item / a.heads);
  const int h = static_cast<int>(item % a.heads);
  const int hd = a.kv.head_dim;
  const int kv_head = h / (a.heads / a.kv.kv_heads);
  float* q = q_shared[warp];
  for (int d = lane; d < hd; d += 32)
    q[d] = a.q.data[static_cast<long long>(t) * a.q.stride + h * hd + d];
  __syncwarp();
  const int32_t* table = a.batch.block_ids + a.batch.block_offsets[a.batch.token_seq[t]];
  const int len = a.batch.positions[t] + 1;
  const int first = a.window > 0 ? max(0, len - a.window) : 0;
  const long long head_at = static_cast<long long>(kv_head) * hd;
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  float acc[dims_per_lane];
#pragma unroll
  for (int i = 0; i < dims_per_lane; ++i)
    acc[i] = 0.0f;
  for (int base = first; base < len; base += 32) {
    const int p = base + lane;
    const bool valid = p < len;
    const long long slot = valid ? a.kv.position_offset(table, p) + head_at : 0;
    const float score = valid ? key_score(q, keys + slot, hd, a.scale) : -INFINITY;
    const float new_max = fmaxf(running_max, warp_max(score));
    const float rescale = expf(running_max - new_max);
    const float e = valid ? expf(score - new_max) : 0.0f;
    running_sum = running_sum * rescale + warp_sum(e);
#pragma unroll
    for (int i = 0; i < dims_per_lane; ++i)
      acc[i] = acc[i] * rescale;
    const int count = min(32, len - base);
    // Unrolled so that later values' loads issue before earlier ones are summed; each acc[i]
    // still adds j in order.
#pragma unroll 4
    for (int j = 0; j < count; ++j) {
      const float ej = __shfl_sync(full_warp, e, j);
      const Element* value = values + __shfl_sync(full_warp, slot, j);
#pragma unroll
      for (int i = 0; i < dims_per_lane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) acc[i] = fmaf(ej, kv_load(value + d), acc[i]);
      }
    }
    running_max = new_max;
  }
  float* o = a.out.data + static_cast<long long>(t) * a.out.stride + h * hd;
#pragma unroll
  for (int i = 0; i < dims_per_lane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) o[d] = acc[i] / running_sum;
  }
}

// `keys` and `values` hold s.element: float, or the bits of a bfloat16.
template <class Launch>
void dispatch_kv_write(void* keys, void* values, const kv_shape& s, const tensor& k,
                       const tensor& v, const device_batch& batch, Launch&& launch) {
  const long long items = static_cast<long long>(batch.tokens) * s.kv_heads * s.head_dim;
  if (items == 0) return;
  if (s.element == dtype::bf16) {
    launch(kv_write_kernel<unsigned short>, dim3(blocks_for(items)), dim3(threads_per_block),
           static_cast<unsigned short*>(keys), static_cast<unsigned short*>(values), s, k, v,
           batch);
  } else {
    launch(kv_write_kernel<float>, dim3(blocks_for(items)), dim3(threads_per_block),
           static_cast<float*>(keys), static_cast<float*>(values), s, k, v, batch);
  }
}

template <class Launch>
void dispatch_attention(const attention_args& a, Launch&& launch) {
  const long long warps = static_cast<long long>(a.batch.tokens) * a.heads;
  if (warps == 0) return;
  const auto blocks =
      static_cast<unsigned>((warps + attention_warps_per_block - 1) / attention_warps_per_block);
  if (a.kv.element == dtype::bf16) {
    launch(attention_kernel<unsigned short>, dim3(blocks), dim3(attention_warps_per_block * 32), a);
  } else {
    launch(attention_kernel<float>, dim3(blocks), dim3(attention_warps_per_block * 32), a);
  }
}

}  // namespace
}  // namespace brigade::gpu::cuda

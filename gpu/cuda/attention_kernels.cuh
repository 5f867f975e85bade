// Paged KV write and causal attention kernels (see matmul_kernel.cuh for why kernels live in
// headers).
//
// Attention runs one warp per (token, head) with an online softmax over tiles of 32 positions,
// starting at the first position the token sees (0, or the start of its sliding window). Lane l
// scores position tile + l with a sequential dot product; the tile's maximum and sum are
// butterflies; values are accumulated position by position, each lane owning head_dim / 32
// dimensions. The order of every reduction depends only on the token's own position and window,
// so a token's output never depends on the rest of the batch.
#pragma once

#include <cstdint>

#include "gpu/cuda/device_batch.hpp"
#include "gpu/cuda/kernel_support.cuh"
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

__global__ void kv_write_kernel(float* keys, float* values, kv_shape s, tensor k, tensor v,
                                device_batch batch) {
  const int row = s.kv_heads * s.head_dim;
  const long long items = static_cast<long long>(batch.tokens) * row;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long t = item / row;
    const int i = static_cast<int>(item % row);
    const int32_t* table = batch.block_ids + batch.block_offsets[batch.token_seq[t]];
    const long long at = s.position_offset(table, batch.positions[t]) + i;
    keys[at] = k.data[t * k.stride + i];
    values[at] = v.data[t * v.stride + i];
  }
}

struct attention_args {
  const float* keys;
  const float* values;
  kv_shape kv;
  tensor q;
  tensor out;
  device_batch batch;
  int heads;
  float scale;
  int window;
};

// Score of one key: a sequential fused multiply-add chain over the head's dimensions.
__device__ inline float key_score(const float* q, const float* key, int head_dim, float scale) {
  float dot = 0.0f;
  for (int d = 0; d < head_dim; ++d)
    dot = fmaf(q[d], key[d], dot);
  return dot * scale;
}

__global__ void __launch_bounds__(attention_warps_per_block * 32)
    attention_kernel(attention_args a) {
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
    const float score = valid ? key_score(q, a.keys + slot, hd, a.scale) : -INFINITY;
    const float new_max = fmaxf(running_max, warp_max(score));
    const float rescale = expf(running_max - new_max);
    const float e = valid ? expf(score - new_max) : 0.0f;
    running_sum = running_sum * rescale + warp_sum(e);
#pragma unroll
    for (int i = 0; i < dims_per_lane; ++i)
      acc[i] = acc[i] * rescale;
    const int count = min(32, len - base);
    for (int j = 0; j < count; ++j) {
      const float ej = __shfl_sync(full_warp, e, j);
      const float* value = a.values + __shfl_sync(full_warp, slot, j);
#pragma unroll
      for (int i = 0; i < dims_per_lane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) acc[i] = fmaf(ej, value[d], acc[i]);
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

template <class Launch>
void dispatch_kv_write(float* keys, float* values, const kv_shape& s, const tensor& k,
                       const tensor& v, const device_batch& batch, Launch&& launch) {
  const long long items = static_cast<long long>(batch.tokens) * s.kv_heads * s.head_dim;
  if (items == 0) return;
  launch(kv_write_kernel, dim3(blocks_for(items)), dim3(threads_per_block), keys, values, s, k, v,
         batch);
}

template <class Launch>
void dispatch_attention(const attention_args& a, Launch&& launch) {
  const long long warps = static_cast<long long>(a.batch.tokens) * a.heads;
  if (warps == 0) return;
  const auto blocks =
      static_cast<unsigned>((warps + attention_warps_per_block - 1) / attention_warps_per_block);
  launch(attention_kernel, dim3(blocks), dim3(attention_warps_per_block * 32), a);
}

}  // namespace
}  // namespace brigade::gpu::cuda

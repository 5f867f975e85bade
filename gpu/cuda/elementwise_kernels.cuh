// Row-wise CUDA kernels: norms, rotary embedding, activation, residual add, clamp, row copies
// and embedding lookups, with the launch shapes of each (see matmul_kernel.cuh for why kernels
// live in headers). Each output element depends only on its own row, so these are batch
// invariant by construction; the one reduction (the norm's sum of squares) is a fixed per-lane
// order plus a fixed butterfly.
#pragma once

#include <cstdint>

#include "gpu/cuda/kernel_support.cuh"
#include "gpu/dtype.hpp"
#include "gpu/tensor.hpp"

namespace brigade::gpu::cuda {
namespace {

constexpr int warps_per_norm_block = threads_per_block / 32;

__device__ inline float* at(const tensor& t, long long r, long long c) {
  return t.data + r * t.stride + c;
}

// Elements a lane loads before it uses them in the norm: loads in flight together rather than
// one global-memory latency per element (a row of 2048 is 64 elements a lane).
constexpr int norm_batch = 16;

// One warp per (row, group): lanes take every 32nd element, then a butterfly. Each lane's sum
// runs over its elements in order whatever the batching, so the bits are those of the plain loop.
__global__ void rms_norm_kernel(tensor x, const float* weight, int group, float eps, tensor y) {
  const int groups_per_row = x.cols / group;
  const long long item =
      static_cast<long long>(blockIdx.x) * warps_per_norm_block + threadIdx.x / 32;
  if (item >= static_cast<long long>(x.rows) * groups_per_row) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const long long r = item / groups_per_row;
  const long long g = item % groups_per_row * group;
  const float* in = at(x, r, g);
  float* out = at(y, r, g);
  constexpr int span = 32 * norm_batch;
  float squares = 0.0f;
  int i = lane;
  for (; i + (norm_batch - 1) * 32 < group; i += span) {
    float v[norm_batch];
#pragma unroll
    for (int u = 0; u < norm_batch; ++u)
      v[u] = in[i + u * 32];
#pragma unroll
    for (int u = 0; u < norm_batch; ++u)
      squares = fmaf(v[u], v[u], squares);
  }
  for (; i < group; i += 32)
    squares = fmaf(in[i], in[i], squares);
  squares = warp_sum(squares);
  const float inv = 1.0f / sqrtf(squares / static_cast<float>(group) + eps);
  // Each lane rewrites only the elements it read, so y may be x: a batch is read whole before
  // any of it is written.
  i = lane;
  for (; i + (norm_batch - 1) * 32 < group; i += span) {
    float v[norm_batch], w[norm_batch];
#pragma unroll
    for (int u = 0; u < norm_batch; ++u) {
      v[u] = in[i + u * 32];
      w[u] = weight[i + u * 32];
    }
#pragma unroll
    for (int u = 0; u < norm_batch; ++u)
      out[i + u * 32] = (v[u] * inv) * w[u];
  }
  for (; i < group; i += 32)
    out[i] = (in[i] * inv) * weight[i];
}

__global__ void rope_kernel(tensor x, const int32_t* positions, int heads, int head_dim,
                            const float* cos_table, const float* sin_table) {
  const int half = head_dim / 2;
  const long long items = static_cast<long long>(x.rows) * heads * half;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long r = item / (static_cast<long long>(heads) * half);
    const int h = static_cast<int>(item / half % heads);
    const int i = static_cast<int>(item % half);
    const long long table_at = static_cast<long long>(positions[r]) * half + i;
    const float c = cos_table[table_at];
    const float s = sin_table[table_at];
    float* v = at(x, r, static_cast<long long>(h) * head_dim);
    const float x1 = v[i];
    const float x2 = v[i + half];
    v[i] = x1 * c - x2 * s;
    v[i + half] = x2 * c + x1 * s;
  }
}

__global__ void silu_mul_kernel(tensor gate_up, tensor out) {
  const long long items = static_cast<long long>(out.rows) * out.cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long r = item / out.cols;
    const long long i = item % out.cols;
    const float g = *at(gate_up, r, i);
    const float up = *at(gate_up, r, i + out.cols);
    *at(out, r, i) = (g / (1.0f + expf(-g))) * up;
  }
}

__global__ void add_kernel(tensor x, tensor y) {
  const long long items = static_cast<long long>(x.rows) * x.cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long r = item / x.cols;
    const long long c = item % x.cols;
    float* a = at(x, r, c);
    *a = *a + *at(y, r, c);
  }
}

// The same comparisons as std::min(std::max(a, -limit), limit), NaN handling included.
__global__ void clamp_kernel(tensor x, float limit) {
  const long long items = static_cast<long long>(x.rows) * x.cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    float* a = at(x, item / x.cols, item % x.cols);
    const float low = *a < -limit ? -limit : *a;
    *a = limit < low ? limit : low;
  }
}

// dst row i = src row rows[i] (Gather) or dst row rows[i] = src row i (scatter).
template <bool Gather>
__global__ void copy_rows_kernel(tensor src, const int32_t* rows, tensor dst, int count, int cols) {
  const long long items = static_cast<long long>(count) * cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long i = item / cols;
    const long long c = item % cols;
    if (Gather) {
      *at(dst, i, c) = *at(src, rows[i], c);
    } else {
      *at(dst, rows[i], c) = *at(src, i, c);
    }
  }
}

__device__ inline float widen(const float* p) {
  return *p;
}

template <dtype T>
__global__ void embed_kernel(const void* table, int pitch, const int32_t* ids, tensor out) {
  const long long items = static_cast<long long>(out.rows) * out.cols;
  for (long long item = first_item(); item < items; item += item_stride()) {
    const long long r = item / out.cols;
    const long long c = item % out.cols;
    const long long at_elem = static_cast<long long>(ids[r]) * pitch + c;
    float v;
    if (T == dtype::f32) {
      v = widen(static_cast<const float*>(table) + at_elem);
    } else if (T == dtype::bf16) {
      v = widen_bf16(static_cast<const unsigned short*>(table)[at_elem]);
    } else {
      v = __half2float(__ushort_as_half(static_cast<const unsigned short*>(table)[at_elem]));
    }
    *at(out, r, c) = v;
  }
}

inline long long elements(const tensor& t) {
  return static_cast<long long>(t.rows) * t.cols;
}

// Dispatchers: each launches its kernel through `launch(kernel, grid, block, args...)` when there
// is work. Arguments are assumed checked by the caller.

template <class Launch>
void dispatch_rms_norm(const tensor& x, const float* weight, int group, float eps, const tensor& y,
                       Launch&& launch) {
  const long long warps = static_cast<long long>(x.rows) * (x.cols / group);
  if (warps == 0) return;
  const auto blocks =
      static_cast<unsigned>((warps + warps_per_norm_block - 1) / warps_per_norm_block);
  launch(rms_norm_kernel, dim3(blocks), dim3(threads_per_block), x, weight, group, eps, y);
}

template <class Launch>
void dispatch_rope(const tensor& x, const int32_t* positions, int heads, int head_dim,
                   const float* cos_table, const float* sin_table, Launch&& launch) {
  const long long items = static_cast<long long>(x.rows) * heads * (head_dim / 2);
  if (items == 0) return;
  launch(rope_kernel, dim3(blocks_for(items)), dim3(threads_per_block), x, positions, heads,
         head_dim, cos_table, sin_table);
}

template <class Launch>
void dispatch_silu_mul(const tensor& gate_up, const tensor& out, Launch&& launch) {
  if (elements(out) == 0) return;
  launch(silu_mul_kernel, dim3(blocks_for(elements(out))), dim3(threads_per_block), gate_up, out);
}

template <class Launch>
void dispatch_add(const tensor& x, const tensor& y, Launch&& launch) {
  if (elements(x) == 0) return;
  launch(add_kernel, dim3(blocks_for(elements(x))), dim3(threads_per_block), x, y);
}

template <class Launch>
void dispatch_clamp(const tensor& x, float limit, Launch&& launch) {
  if (elements(x) == 0) return;
  launch(clamp_kernel, dim3(blocks_for(elements(x))), dim3(threads_per_block), x, limit);
}

/// Gather: dst row i = src row rows[i] for every dst row; scatter: dst row rows[i] = src row i
/// for every src row.
template <bool Gather, class Launch>
void dispatch_copy_rows(const tensor& src, const int32_t* rows, const tensor& dst,
                        Launch&& launch) {
  const tensor& counted = Gather ? dst : src;
  if (elements(counted) == 0) return;
  launch(copy_rows_kernel<Gather>, dim3(blocks_for(elements(counted))), dim3(threads_per_block),
         src, rows, dst, counted.rows, counted.cols);
}

template <class Launch>
void dispatch_embed(dtype type, const void* table, int pitch, const int32_t* ids, const tensor& out,
                    Launch&& launch) {
  if (elements(out) == 0) return;
  const dim3 grid(blocks_for(elements(out)));
  switch (type) {
    case dtype::f32:
      return launch(embed_kernel<dtype::f32>, grid, dim3(threads_per_block), table, pitch, ids,
                    out);
    case dtype::bf16:
      return launch(embed_kernel<dtype::bf16>, grid, dim3(threads_per_block), table, pitch, ids,
                    out);
    case dtype::f16:
      return launch(embed_kernel<dtype::f16>, grid, dim3(threads_per_block), table, pitch, ids,
                    out);
  }
}

}  // namespace
}  // namespace brigade::gpu::cuda

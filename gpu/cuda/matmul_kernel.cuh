// The CUDA matmul kernel: y = x * W^T (+ bias), W in its file dtype, widened to float32 in
// registers.
//
// One warp computes a tile of Rows x cols_per_warp outputs. Its 32 lanes split k as
// gpu/cuda/matmul_order.hpp describes (chunk c of 8 elements to lane c % 32, then a butterfly),
// so every output element has the same reduction order whatever the batch size: the tile height
// may be chosen from m freely without changing a single bit of any row.
//
// Loads are coalesced: a warp reads 32 consecutive chunks of a weight row (512 bytes of bf16)
// and of each activation row at once. Weight rows are padded to whole chunks (device_matrix),
// so weight chunks are always 16-byte aligned; activation rows are read as float4 when their
// start and stride allow it, and element by element otherwise, in the same order.
//
// Kernels and their launch shapes live in .cuh headers, apart from the .cu launchers, so that
// the tests can also run them on the host (tests/gpu/warp_emulator.hpp). Each header is
// included by exactly one .cu file and by the emulation test: the unnamed namespace keeps the
// two copies apart.
#pragma once

#include "gpu/cuda/kernel_support.cuh"
#include "gpu/cuda/matmul_order.hpp"
#include "gpu/dtype.hpp"

namespace brigade::gpu::cuda {
namespace {

constexpr int warp_lanes = 32;
constexpr int warps_per_block = 4;
constexpr int cols_per_warp = 4;
constexpr int cols_per_block = warps_per_block * cols_per_warp;
static_assert(matrix_chunk == 8, "the weight loaders read chunks of 8 elements");

// Weight loaders: a chunk of 8 consecutive weights as raw registers, element i of it widened to
// float32 (exactly: bf16 and f16 are subsets of f32), and single elements for the k tail.
struct f32_weights {
  using elem = float;
  struct chunk {
    float4 lo, hi;
  };
  __device__ static chunk load(const float* p) {
    return {*reinterpret_cast<const float4*>(p), *reinterpret_cast<const float4*>(p + 4)};
  }
  __device__ static float get(const chunk& c, int i) {
    const float4& v = i < 4 ? c.lo : c.hi;
    const int j = i & 3;
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
  }
  __device__ static float at(const float* p, int i) { return p[i]; }
};

__device__ inline unsigned chunk_word(const uint4& c, int i) {
  const int j = i >> 1;
  return j == 0 ? c.x : j == 1 ? c.y : j == 2 ? c.z : c.w;
}

struct bf16_weights {
  using elem = unsigned short;
  using chunk = uint4;
  __device__ static chunk load(const elem* p) { return *reinterpret_cast<const uint4*>(p); }
  __device__ static float get(const chunk& c, int i) {
    const unsigned word = chunk_word(c, i);
    return __uint_as_float((i & 1) ? (word & 0xffff0000u) : (word << 16));
  }
  __device__ static float at(const elem* p, int i) {
    return __uint_as_float(static_cast<unsigned>(p[i]) << 16);
  }
};

struct f16_weights {
  using elem = unsigned short;
  using chunk = uint4;
  __device__ static chunk load(const elem* p) { return *reinterpret_cast<const uint4*>(p); }
  __device__ static float get(const chunk& c, int i) {
    const unsigned word = chunk_word(c, i);
    const unsigned bits = (i & 1) ? (word >> 16) : (word & 0xffffu);
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  }
  __device__ static float at(const elem* p, int i) { return __half2float(__ushort_as_half(p[i])); }
};

template <bool Vector>
__device__ inline void load_x_chunk(const float* row, int k0, float (&v)[matrix_chunk]) {
  if (Vector) {
    const float4 a = *reinterpret_cast<const float4*>(row + k0);
    const float4 b = *reinterpret_cast<const float4*>(row + k0 + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < matrix_chunk; ++i)
      v[i] = row[k0 + i];
  }
}

struct matmul_args {
  const float* x;
  int ldx;
  int m;
  const void* w;
  int pitch;
  int n;
  int k;
  const float* bias;
  float* y;
  int ldy;
};

template <int Rows>
using tile_sums = float[Rows][cols_per_warp];

// Chunks a lane has in flight: at one or two rows a decode step's product has few warps per SM,
// so each keeps more weight loads outstanding (registers allow it at that height).
template <int Rows>
constexpr int chunks_in_flight = Rows <= 2 ? 4 : 2;

// This lane's fused multiply-add chain over its full chunks (lane, lane + 32, ...), in order
// (unrolling only lets later loads issue early).
template <class W, int Rows, bool VectorX>
__device__ inline void accumulate_chunks(const float* const (&xr)[Rows],
                                         const typename W::elem* const (&wr)[cols_per_warp],
                                         int full_chunks, int lane, tile_sums<Rows>& acc) {
#pragma unroll(chunks_in_flight <Rows>)
  for (int ch = lane; ch < full_chunks; ch += warp_lanes) {
    const int k0 = ch * matrix_chunk;
    typename W::chunk wc[cols_per_warp];
#pragma unroll
    for (int c = 0; c < cols_per_warp; ++c)
      wc[c] = W::load(wr[c] + k0);
    float xv[Rows][matrix_chunk];
#pragma unroll
    for (int r = 0; r < Rows; ++r)
      load_x_chunk<VectorX>(xr[r], k0, xv[r]);
#pragma unroll
    for (int i = 0; i < matrix_chunk; ++i) {
#pragma unroll
      for (int c = 0; c < cols_per_warp; ++c) {
        const float wi = W::get(wc[c], i);
#pragma unroll
        for (int r = 0; r < Rows; ++r)
          acc[r][c] = fmaf(xv[r][i], wi, acc[r][c]);
      }
    }
  }
}

// The partial last chunk [k0, k0 + tail): the highest chunk index, so it ends its lane's chain.
template <class W, int Rows>
__device__ inline void accumulate_tail(const float* const (&xr)[Rows],
                                       const typename W::elem* const (&wr)[cols_per_warp], int k0,
                                       int tail, tile_sums<Rows>& acc) {
  for (int i = k0; i < k0 + tail; ++i) {
#pragma unroll
    for (int c = 0; c < cols_per_warp; ++c) {
      const float wi = W::at(wr[c], i);
#pragma unroll
      for (int r = 0; r < Rows; ++r)
        acc[r][c] = fmaf(xr[r][i], wi, acc[r][c]);
    }
  }
}

// Butterflies every lane's partial sums into the tile's outputs; lane r * cols_per_warp + c
// then stores output (r, c), plus its bias.
template <int Rows>
__device__ inline void reduce_and_store(tile_sums<Rows>& acc, int lane, int m0, int n0,
                                        const matmul_args& a) {
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int c = 0; c < cols_per_warp; ++c) {
#pragma unroll
      for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
        acc[r][c] = acc[r][c] + __shfl_xor_sync(full_warp, acc[r][c], offset);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int c = 0; c < cols_per_warp; ++c) {
      const int row = m0 + r;
      const int col = n0 + c;
      if (lane == r * cols_per_warp + c && row < a.m && col < a.n) {
        const float sum = acc[r][c];
        a.y[static_cast<ptrdiff_t>(row) * a.ldy + col] = a.bias ? sum + a.bias[col] : sum;
      }
    }
  }
}

// One block's tile of the product: rows [tile_m * Rows, + Rows) and columns
// [tile_n * cols_per_block, + cols_per_block), one warp per cols_per_warp of them.
template <class W, int Rows, bool VectorX>
__device__ inline void matmul_tile(const matmul_args& a, int tile_m, int tile_n) {
  const int lane = static_cast<int>(threadIdx.x) % warp_lanes;
  const int warp = static_cast<int>(threadIdx.x) / warp_lanes;
  const int n0 = tile_n * cols_per_block + warp * cols_per_warp;
  const int m0 = tile_m * Rows;
  if (n0 >= a.n) return;  // uniform across the warp: no lane is left out of the shuffles
  const auto* w = static_cast<const typename W::elem*>(a.w);
  // Rows and columns past the ends are clamped for loading and never stored.
  const float* xr[Rows];
  const typename W::elem* wr[cols_per_warp];
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    xr[r] = a.x + static_cast<ptrdiff_t>(min(m0 + r, a.m - 1)) * a.ldx;
  }
#pragma unroll
  for (int c = 0; c < cols_per_warp; ++c) {
    wr[c] = w + static_cast<ptrdiff_t>(min(n0 + c, a.n - 1)) * a.pitch;
  }
  tile_sums<Rows> acc;
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int c = 0; c < cols_per_warp; ++c)
      acc[r][c] = 0.0f;
  }
  const int full_chunks = a.k / matrix_chunk;
  accumulate_chunks<W, Rows, VectorX>(xr, wr, full_chunks, lane, acc);
  const int tail = a.k - full_chunks * matrix_chunk;
  if (tail > 0 && lane == full_chunks % warp_lanes) {
    accumulate_tail<W, Rows>(xr, wr, full_chunks * matrix_chunk, tail, acc);
  }
  reduce_and_store<Rows>(acc, lane, m0, n0, a);
}

// Grid: x over tiles of Rows rows, y over tiles of cols_per_block output columns.
template <class W, int Rows, bool VectorX>
__global__ void __launch_bounds__(warps_per_block* warp_lanes) matmul_kernel(matmul_args a) {
  matmul_tile<W, Rows, VectorX>(a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y));
}

// Several products in one launch (a layer's experts): block b belongs to the last job j with
// first_block[j] <= b, and is tile (b - first_block[j]) of that job, its tiles numbered row tile
// first. Each output is computed exactly as matmul_kernel computes it (the tile height is free,
// see the file comment), so a grouped product has every bit of the products launched one by one.
template <class W, int Rows, bool VectorX>
__global__ void __launch_bounds__(warps_per_block* warp_lanes)
    grouped_matmul_kernel(const matmul_args* jobs, const int* first_block, int count) {
  const int b = static_cast<int>(blockIdx.x);
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_block[mid] <= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const matmul_args a = jobs[lo];
  const int local = b - first_block[lo];
  const int tiles_m = (a.m + Rows - 1) / Rows;
  matmul_tile<W, Rows, VectorX>(a, local % tiles_m, local / tiles_m);
}

static_assert(4 * cols_per_warp <= warp_lanes, "each output of a tile needs its own storing lane");

// Launches the instantiation for `type`, the tile height (chosen from m only to waste fewer lanes
// on small batches; see the file comment for why that cannot change any result) and the
// activation load width, through `launch(kernel, grid, block, args)`.
template <class W, int Rows, class Launch>
void launch_matmul_rows(const matmul_args& a, bool vector_x, Launch&& launch) {
  const dim3 grid(static_cast<unsigned>((a.m + Rows - 1) / Rows),
                  static_cast<unsigned>((a.n + cols_per_block - 1) / cols_per_block));
  const dim3 block(warps_per_block * warp_lanes);
  if (vector_x) {
    launch(matmul_kernel<W, Rows, true>, grid, block, a);
  } else {
    launch(matmul_kernel<W, Rows, false>, grid, block, a);
  }
}

/// The tile height for m rows: 1, 2, or 4 (the only heights instantiated).
inline int matmul_tile_rows(int m) {
  return m == 1 ? 1 : m == 2 ? 2 : 4;
}

template <class W, class Launch>
void launch_matmul_typed(const matmul_args& a, bool vector_x, Launch&& launch) {
  const int rows = matmul_tile_rows(a.m);
  if (rows == 1) return launch_matmul_rows<W, 1>(a, vector_x, launch);
  if (rows == 2) return launch_matmul_rows<W, 2>(a, vector_x, launch);
  launch_matmul_rows<W, 4>(a, vector_x, launch);
}

/// Activation rows can be read as float4 when their start and stride are 16-byte aligned.
inline bool matmul_vector_x(const float* x, int ldx) {
  return reinterpret_cast<unsigned long long>(x) % 16 == 0 && ldx % 4 == 0;
}

template <class Launch>
void dispatch_matmul(dtype type, const matmul_args& a, Launch&& launch) {
  const bool vector_x = matmul_vector_x(a.x, a.ldx);
  switch (type) {
    case dtype::f32:
      return launch_matmul_typed<f32_weights>(a, vector_x, launch);
    case dtype::bf16:
      return launch_matmul_typed<bf16_weights>(a, vector_x, launch);
    case dtype::f16:
      return launch_matmul_typed<f16_weights>(a, vector_x, launch);
  }
}

/// How a group of products is launched: one tile height and one activation load width for all
/// (neither changes a bit), and each job's first block.
struct matmul_group_plan {
  int rows = 1;
  bool vector_x = true;
  int blocks = 0;
};

/// Plans `count` jobs, each with m and n above zero; fills first_block[0 .. count).
inline matmul_group_plan plan_matmul_group(const matmul_args* jobs, int count, int* first_block) {
  matmul_group_plan plan;
  int most_rows = 1;
  for (int j = 0; j < count; ++j) {
    most_rows = jobs[j].m > most_rows ? jobs[j].m : most_rows;
    plan.vector_x = plan.vector_x && matmul_vector_x(jobs[j].x, jobs[j].ldx);
  }
  plan.rows = matmul_tile_rows(most_rows);
  for (int j = 0; j < count; ++j) {
    first_block[j] = plan.blocks;
    plan.blocks += ((jobs[j].m + plan.rows - 1) / plan.rows) *
                   ((jobs[j].n + cols_per_block - 1) / cols_per_block);
  }
  return plan;
}

template <class W, int Rows, class Launch>
void launch_matmul_group_rows(const matmul_group_plan& plan, const matmul_args* jobs,
                              const int* first_block, int count, Launch&& launch) {
  const dim3 grid(static_cast<unsigned>(plan.blocks));
  const dim3 block(warps_per_block * warp_lanes);
  if (plan.vector_x) {
    launch(grouped_matmul_kernel<W, Rows, true>, grid, block, jobs, first_block, count);
  } else {
    launch(grouped_matmul_kernel<W, Rows, false>, grid, block, jobs, first_block, count);
  }
}

template <class W, class Launch>
void launch_matmul_group_typed(const matmul_group_plan& plan, const matmul_args* jobs,
                               const int* first_block, int count, Launch&& launch) {
  if (plan.rows == 1) return launch_matmul_group_rows<W, 1>(plan, jobs, first_block, count, launch);
  if (plan.rows == 2) return launch_matmul_group_rows<W, 2>(plan, jobs, first_block, count, launch);
  launch_matmul_group_rows<W, 4>(plan, jobs, first_block, count, launch);
}

/// Launches a planned group whose weights all have `type`; `jobs` and `first_block` are where
/// the kernel reads them (device memory on a device).
template <class Launch>
void dispatch_grouped_matmul(dtype type, const matmul_group_plan& plan, const matmul_args* jobs,
                             const int* first_block, int count, Launch&& launch) {
  if (plan.blocks == 0) return;
  switch (type) {
    case dtype::f32:
      return launch_matmul_group_typed<f32_weights>(plan, jobs, first_block, count, launch);
    case dtype::bf16:
      return launch_matmul_group_typed<bf16_weights>(plan, jobs, first_block, count, launch);
    case dtype::f16:
      return launch_matmul_group_typed<f16_weights>(plan, jobs, first_block, count, launch);
  }
}

}  // namespace
}  // namespace brigade::gpu::cuda

// Runs brigade's CUDA kernels on the host, so that their logic (indexing, paging, reduction
// order, shuffles) is tested on every machine, with or without a GPU.
//
// Include this header before a kernel header (gpu/cuda/*.cuh). It supplies the CUDA built-ins
// those kernels use: qualifiers, dim3/float4/uint4, threadIdx and friends, half conversions and
// the warp primitives. Blocks and warps run one after another; the 32 lanes of a warp are
// cooperative fibers on the calling thread. A lane runs until it reaches a warp primitive (a
// shuffle or __syncwarp), which waits until every live lane of the warp has reached it, as a
// converged warp does on the GPU. A primitive reached by only some lanes of a warp is a bug in
// the kernel (undefined on the GPU) and fails the launch.
#pragma once

#include <math.h>

#include <cstring>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "gpu/dtype.hpp"

#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
// One warp runs at a time and each warp uses its own part of a block's shared memory, so a
// function-local static stands in for __shared__.
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct __half {
  unsigned short bits;
};

/// The indices of the lane running now; set by the emulator before it resumes a lane.
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

using std::max;
using std::min;

inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline __half __ushort_as_half(unsigned short bits) {
  return __half{bits};
}
inline float __half2float(__half h) {
  return brigade::gpu::f16_to_f32(h.bits);
}

namespace brigade::gpu::test::emulator {

/// Exchanges `bytes` at `value` with lane `source` of the running warp; returns the source's.
void exchange(void* value, size_t bytes, int source);
/// Waits for every live lane of the running warp.
void warp_barrier();

/// Runs body() as every thread of a grid (block.y and block.z must be 1). Throws
/// std::logic_error when lanes of a warp diverge at a warp primitive.
void run_grid(dim3 grid, dim3 block, const std::function<void()>& body);

/// The launch function for the kernel headers' dispatchers.
inline auto launcher() {
  return [](auto kernel, dim3 grid, dim3 block, const auto&... args) {
    run_grid(grid, block, [&] { kernel(args...); });
  };
}

}  // namespace brigade::gpu::test::emulator

template <class T>
T __shfl_sync(unsigned, T value, int source) {
  brigade::gpu::test::emulator::exchange(&value, sizeof value, source);
  return value;
}
template <class T>
T __shfl_xor_sync(unsigned, T value, int offset) {
  brigade::gpu::test::emulator::exchange(&value, sizeof value,
                                         static_cast<int>(threadIdx.x % 32) ^ offset);
  return value;
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  brigade::gpu::test::emulator::warp_barrier();
}

// Device helpers shared by the kernels. Kernel headers (*.cuh) include no CUDA header
// themselves: nvcc provides the built-ins in .cu files, and tests/gpu/warp_emulator.hpp provides
// them on the host, where the kernels run for tests on machines without a GPU.
#pragma once

namespace brigade::gpu::cuda {

constexpr int threads_per_block = 256;
constexpr unsigned full_warp = 0xffffffffu;

/// Blocks for a grid-stride loop over `items`: enough to fill the device, never past the grid
/// limit (the loop covers the rest).
inline unsigned blocks_for(long long items) {
  const long long wanted = (items + threads_per_block - 1) / threads_per_block;
  if (wanted < 1) return 1;
  return static_cast<unsigned>(wanted < (1LL << 20) ? wanted : (1LL << 20));
}

/// This thread's first item and the stride of a grid-stride loop.
__device__ inline long long first_item() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline long long item_stride() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

/// A bfloat16's bits widened to float32, exactly (a bf16 is a float32's upper half).
__device__ inline float widen_bf16(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

/// Sum over the warp by a butterfly; every lane gets the same bits (addition commutes).
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = v + __shfl_xor_sync(full_warp, v, offset);
  return v;
}

/// Maximum over the warp; every lane gets the same value.
__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(full_warp, v, offset));
  }
  return v;
}

}  // namespace brigade::gpu::cuda

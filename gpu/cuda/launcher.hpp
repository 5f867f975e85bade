// The launch function that the kernel headers' dispatchers take, for real kernels: launches a
// kernel pointer with <<<>>> on a stream. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

namespace brigade::gpu::cuda {

inline auto cuda_launcher(cudaStream_t stream) {
  return [stream](auto kernel, dim3 grid, dim3 block, const auto&... args) {
    kernel<<<grid, block, 0, stream>>>(args...);
  };
}

}  // namespace brigade::gpu::cuda

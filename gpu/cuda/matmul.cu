// Launcher of the CUDA matmul (the kernel and its reduction order: matmul_kernel.cuh).
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/launcher.hpp"
#include "gpu/cuda/matmul_kernel.cuh"

namespace brigade::gpu::cuda {
namespace {

void check_shapes(const tensor& x, const device_matrix& w, const tensor& y) {
  if (x.cols != w.cols() || y.cols != w.rows() || y.rows != x.rows) {
    throw std::invalid_argument("cuda matmul: x is " + std::to_string(x.rows) + " x " +
                                std::to_string(x.cols) + ", W is " + std::to_string(w.rows()) +
                                " x " + std::to_string(w.cols()) + ", y is " +
                                std::to_string(y.rows) + " x " + std::to_string(y.cols));
  }
  if (static_cast<long long>(w.rows()) > 65535LL * cols_per_block) {
    throw std::invalid_argument("cuda matmul: " + std::to_string(w.rows()) +
                                " output columns exceed the grid limit");
  }
}

}  // namespace

void launch_matmul(cudaStream_t stream, const tensor& x, const device_matrix& w, const float* bias,
                   const tensor& y) {
  check_shapes(x, w, y);
  if (x.rows == 0 || w.rows() == 0) return;
  const matmul_args a{x.data,   x.stride, x.rows, w.data(), w.pitch(),
                      w.rows(), w.cols(), bias,   y.data,   y.stride};
  dispatch_matmul(w.type(), a, cuda_launcher(stream));
  check_launch("matmul_kernel");
}

}  // namespace brigade::gpu::cuda

// Launchers of the routing kernels (routing_kernels.cuh): argument checks, then dispatch.
#include <stdexcept>
#include <string>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/launcher.hpp"
#include "gpu/cuda/routing_kernels.cuh"

namespace brigade::gpu::cuda {

void launch_router_topk(cudaStream_t stream, const tensor& logits, int top_k, bool normalize,
                        int32_t* experts, float* weights) {
  if (top_k < 1 || top_k > logits.cols) {
    throw std::invalid_argument("cuda router_topk: top_k " + std::to_string(top_k) +
                                " is outside [1, " + std::to_string(logits.cols) + "]");
  }
  dispatch_router_topk(logits, top_k, normalize, experts, weights, cuda_launcher(stream));
  check_launch("router_topk_kernel");
}

void launch_combine(cudaStream_t stream, const tensor& x, const tensor& y, const float* weights,
                    int k, const tensor* shared, const tensor* shared_gate) {
  if ((shared == nullptr) != (shared_gate == nullptr)) {
    throw std::invalid_argument("cuda combine: shared and shared_gate must both be given");
  }
  if (y.rows < x.rows * k || y.cols != x.cols) {
    throw std::invalid_argument("cuda combine: y must hold rows * k rows of x's width");
  }
  dispatch_combine(x, y, weights, k, shared, shared_gate, cuda_launcher(stream));
  check_launch("combine_kernel");
}

}  // namespace brigade::gpu::cuda

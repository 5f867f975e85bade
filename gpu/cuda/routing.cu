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

void launch_router_sigmoid_topk(cudaStream_t stream, const tensor& logits,
                                const sigmoid_router& spec, int32_t* experts, float* weights) {
  const int n = logits.cols;
  if (spec.groups < 1 || spec.groups > max_router_groups || n % spec.groups != 0) {
    throw std::invalid_argument("cuda router_topk: " + std::to_string(spec.groups) +
                                " expert groups must divide the " + std::to_string(n) +
                                " experts, and at most " + std::to_string(max_router_groups) +
                                " groups are kept on CUDA");
  }
  if (spec.top_groups < 1 || spec.top_groups > spec.groups) {
    throw std::invalid_argument("cuda router_topk: top_groups " + std::to_string(spec.top_groups) +
                                " is outside [1, " + std::to_string(spec.groups) + "]");
  }
  const int open = spec.top_groups * (n / spec.groups);
  if (spec.top_k < 1 || spec.top_k > open) {
    throw std::invalid_argument("cuda router_topk: top_k " + std::to_string(spec.top_k) +
                                " is outside [1, " + std::to_string(open) +
                                "], the experts of the kept groups");
  }
  dispatch_router_sigmoid_topk(logits, spec, experts, weights, cuda_launcher(stream));
  check_launch("router_sigmoid_topk_kernel");
}

void launch_combine(cudaStream_t stream, const tensor& x, const tensor& y, const float* weights,
                    int k, const tensor* shared, const tensor* shared_gate) {
  if (shared == nullptr && shared_gate != nullptr) {
    throw std::invalid_argument("cuda combine: shared_gate is given without shared");
  }
  if (y.rows < x.rows * k || y.cols != x.cols) {
    throw std::invalid_argument("cuda combine: y must hold rows * k rows of x's width");
  }
  dispatch_combine(x, y, weights, k, shared, shared_gate, cuda_launcher(stream));
  check_launch("combine_kernel");
}

}  // namespace brigade::gpu::cuda

// Launcher of the CUDA matmul (the kernel and its reduction order: matmul_kernel.cuh).
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/launcher.hpp"
#include "gpu/cuda/matmul_kernel.cuh"
#include "gpu/cuda/staging_ring.hpp"

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

void launch_grouped_matmul(cudaStream_t stream, staging_ring& staging,
                           const grouped_product* products, size_t count) {
  // Kept between calls: this runs for every MoE layer of every step.
  thread_local std::vector<matmul_args> jobs;
  thread_local std::vector<int> first_block;
  jobs.clear();
  bool one_type = true;
  const dtype type = count > 0 ? products[0].w->type() : dtype::f32;
  for (size_t j = 0; j < count; ++j) {
    const grouped_product& p = products[j];
    check_shapes(p.x, *p.w, p.y);
    if (p.x.rows == 0 || p.w->rows() == 0) continue;
    one_type = one_type && p.w->type() == type;
    jobs.push_back({p.x.data, p.x.stride, p.x.rows, p.w->data(), p.w->pitch(), p.w->rows(),
                    p.w->cols(), nullptr, p.y.data, p.y.stride});
  }
  if (jobs.empty()) return;
  if (!one_type || jobs.size() == 1) {
    for (size_t j = 0; j < count; ++j)
      launch_matmul(stream, products[j].x, *products[j].w, nullptr, products[j].y);
    return;
  }
  const int n = static_cast<int>(jobs.size());
  first_block.resize(jobs.size());
  const matmul_group_plan plan = plan_matmul_group(jobs.data(), n, first_block.data());
  const matmul_args* device_jobs = staging.upload_array(jobs.data(), jobs.size());
  const int* device_first = staging.upload_array(first_block.data(), first_block.size());
  dispatch_grouped_matmul(type, plan, device_jobs, device_first, n, cuda_launcher(stream));
  check_launch("grouped_matmul_kernel");
}

}  // namespace brigade::gpu::cuda

// Launchers of the row-wise kernels (elementwise_kernels.cuh): argument checks, then dispatch.
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/elementwise_kernels.cuh"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/launcher.hpp"

namespace brigade::gpu::cuda {
namespace {

__global__ void probe_kernel() {}

}  // namespace

cudaError_t run_probe_kernel(cudaStream_t stream) {
  probe_kernel<<<1, 1, 0, stream>>>();
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  return cudaStreamSynchronize(stream);
}

void launch_rms_norm(cudaStream_t stream, const tensor& x, const float* weight, int group,
                     float eps, const tensor& y) {
  if (group <= 0 || x.cols % group != 0 || y.rows != x.rows || y.cols != x.cols) {
    throw std::invalid_argument("cuda rms_norm: group " + std::to_string(group) +
                                " does not divide the " + std::to_string(x.cols) +
                                " columns, or x and y differ in shape");
  }
  dispatch_rms_norm(x, weight, group, eps, y, cuda_launcher(stream));
  check_launch("rms_norm_kernel");
}

void launch_rope(cudaStream_t stream, const tensor& x, const int32_t* positions, int heads,
                 int head_dim, const float* cos_table, const float* sin_table) {
  if (head_dim % 2 != 0 || heads * head_dim > x.cols) {
    throw std::invalid_argument("cuda rope: " + std::to_string(heads) + " heads of " +
                                std::to_string(head_dim) + " do not fit " + std::to_string(x.cols) +
                                " columns (head_dim must be even)");
  }
  dispatch_rope(x, positions, heads, head_dim, cos_table, sin_table, cuda_launcher(stream));
  check_launch("rope_kernel");
}

void launch_silu_mul(cudaStream_t stream, const tensor& gate_up, const tensor& out) {
  if (gate_up.cols != 2 * out.cols || gate_up.rows != out.rows) {
    throw std::invalid_argument("cuda silu_mul: gate_up must be [rows, 2 * out.cols]");
  }
  dispatch_silu_mul(gate_up, out, cuda_launcher(stream));
  check_launch("silu_mul_kernel");
}

void launch_add(cudaStream_t stream, const tensor& x, const tensor& y) {
  if (x.rows != y.rows || x.cols != y.cols) {
    throw std::invalid_argument("cuda add: x and y differ in shape");
  }
  dispatch_add(x, y, cuda_launcher(stream));
  check_launch("add_kernel");
}

void launch_clamp(cudaStream_t stream, const tensor& x, float limit) {
  dispatch_clamp(x, limit, cuda_launcher(stream));
  check_launch("clamp_kernel");
}

void launch_gather_rows(cudaStream_t stream, const tensor& src, const int32_t* rows,
                        const tensor& dst) {
  if (src.cols != dst.cols) throw std::invalid_argument("cuda gather_rows: widths differ");
  dispatch_copy_rows<true>(src, rows, dst, cuda_launcher(stream));
  check_launch("gather_rows_kernel");
}

void launch_scatter_rows(cudaStream_t stream, const tensor& src, const int32_t* rows,
                         const tensor& dst) {
  if (src.cols != dst.cols) throw std::invalid_argument("cuda scatter_rows: widths differ");
  dispatch_copy_rows<false>(src, rows, dst, cuda_launcher(stream));
  check_launch("scatter_rows_kernel");
}

void launch_embed(cudaStream_t stream, const device_matrix& table, const int32_t* ids,
                  const tensor& out) {
  if (out.cols != table.cols()) {
    throw std::invalid_argument("cuda embed: output has " + std::to_string(out.cols) +
                                " columns, the table " + std::to_string(table.cols()));
  }
  dispatch_embed(table.type(), table.data(), table.pitch(), ids, out, cuda_launcher(stream));
  check_launch("embed_kernel");
}

}  // namespace brigade::gpu::cuda

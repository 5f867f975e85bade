// The CPU matmul: y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]), with W packed in panels.
#pragma once

#include <cstddef>

#include "gpu/cpu/kernel_path.hpp"
#include "gpu/cpu/packed_matrix.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::gpu::cpu {

/// y = x * W^T (+ bias) on kernel path `path` (available on this machine). x is [m, w.cols()]
/// with row stride ldx; y is [m, w.rows()] with row stride ldy. Each output element is a fused
/// multiply-add chain over k in increasing order, independent of m, of the thread count, of the
/// row's place in the batch and of the path.
void gemm(const float* x, int ldx, int m, const packed_matrix& w, const float* bias, float* y,
          int ldy, thread_pool& pool, kernel_path path);

/// One product of gemm_grouped(): y = x * W^T (+ bias), operands as gemm() takes them.
struct gemm_product {
  const float* x = nullptr;
  int ldx = 0;
  int m = 0;
  const packed_matrix* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  int ldy = 0;
};

/// Every product of `products`, each output element as gemm() computes it (the same bits), with
/// the work items of all of them handed to the pool at once. A layer's experts at decode are a
/// handful of one-row products of a few microseconds each: one hand-off and one join for all of
/// them instead of one per product.
void gemm_grouped(const gemm_product* products, size_t count, thread_pool& pool, kernel_path path);

/// The multiply-adds gemm() aims to give each parallel work item: BRIGADE_GEMM_ITEM_WORK, else
/// 25,000 (read once). Smaller items spread small products over more threads.
double item_multiply_adds();

}  // namespace brigade::gpu::cpu

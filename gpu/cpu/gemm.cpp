#include "gpu/cpu/gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm_kernels.hpp"

namespace brigade::gpu::cpu {
namespace {

// Work items. Rows come in blocks of block_rows so that a block of x stays in L2 while every
// panel of W streams past it; panels come in groups of panels_per_item, the widest tile.
constexpr int block_rows = 72;
constexpr int panels_per_item = 4;

gemm_block_fn block_kernel(kernel_path path) {
  switch (path) {
    case kernel_path::avx512:
      return gemm_block_avx512;
    case kernel_path::avx512_bf16:
      return gemm_block_avx512_bf16;
    case kernel_path::amx_bf16:
      return gemm_block_amx_bf16;
    case kernel_path::avx2:
      break;
  }
  return gemm_block_avx2;
}

}  // namespace

double item_multiply_adds() {
  static const double work = [] {
    if (const char* env = std::getenv("BRIGADE_GEMM_ITEM_WORK")) {
      const double w = std::atof(env);
      if (w >= 1.0) return w;
    }
    return 2.5e4;
  }();
  return work;
}

void gemm(const float* x, int ldx, int m, const packed_matrix& w, const float* bias, float* y,
          int ldy, thread_pool& pool, kernel_path path) {
  const gemm_product product{x, ldx, m, &w, bias, y, ldy};
  gemm_grouped(&product, 1, pool, path);
}

void gemm_grouped(const gemm_product* products, size_t count, thread_pool& pool, kernel_path path) {
  // Work items run product by product: items [first[j], first[j + 1]) are product j's, row block
  // major, so a row block's x stays in cache while its panel groups go past.
  size_t on_stack[17];
  std::vector<size_t> on_heap;
  size_t* first = on_stack;
  if (count + 1 > std::size(on_stack)) {
    on_heap.resize(count + 1);
    first = on_heap.data();
  }
  first[0] = 0;
  double work = 0.0;
  for (size_t j = 0; j < count; ++j) {
    const gemm_product& p = products[j];
    size_t items = 0;
    if (p.m > 0) {
      const int panel_groups = (p.w->panels() + panels_per_item - 1) / panels_per_item;
      const int row_blocks = (p.m + block_rows - 1) / block_rows;
      items = static_cast<size_t>(row_blocks) * static_cast<size_t>(panel_groups);
      work += static_cast<double>(std::min(p.m, block_rows)) * p.w->cols() * panel_width *
              panels_per_item * static_cast<double>(items);
    }
    first[j + 1] = first[j] + items;
  }
  const size_t items = first[count];
  if (items == 0) return;
  const gemm_block_fn kernel = block_kernel(path);
  // Aim for items of about 25,000 multiply-adds (BRIGADE_GEMM_ITEM_WORK). Decode's products are
  // small (one row against a weight panel that streams from memory), and splitting them over every
  // core is what lets decode use the memory bandwidth of more than one core; the pool's hand-off
  // costs about a microsecond while its workers poll (common/thread_pool.hpp). Items of a million
  // kept such products on one thread: decode at batch 1 ran at ~0.6x of what it does now
  // (docs/cpu_kernels.md).
  const double work_per_item = work / static_cast<double>(items);
  const size_t grain =
      static_cast<size_t>(std::max(1.0, item_multiply_adds() / std::max(1.0, work_per_item)));
  auto run = [&](size_t begin, size_t end) {
    size_t j = static_cast<size_t>(std::upper_bound(first, first + count + 1, begin) - first) - 1;
    for (size_t item = begin; item < end; ++item) {
      while (item >= first[j + 1])
        ++j;
      const gemm_product& p = products[j];
      const gemm_operands op{p.x, p.ldx, p.w, p.bias, p.y, p.ldy};
      const int panel_groups = (p.w->panels() + panels_per_item - 1) / panels_per_item;
      const size_t local = item - first[j];
      const int rb = static_cast<int>(local / static_cast<size_t>(panel_groups));
      const int pg = static_cast<int>(local % static_cast<size_t>(panel_groups));
      const int r0 = rb * block_rows;
      const int p0 = pg * panels_per_item;
      kernel(op, r0, std::min(p.m, r0 + block_rows), p0,
             std::min(p.w->panels(), p0 + panels_per_item));
    }
  };
  pool.parallel_for(items, grain, run);
}

}  // namespace brigade::gpu::cpu

#include "gpu/cpu/gemm.hpp"

#include <algorithm>
#include <cstdlib>

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
  if (m <= 0) return;
  const gemm_operands op{x, ldx, &w, bias, y, ldy};
  const gemm_block_fn kernel = block_kernel(path);
  const int panel_groups = (w.panels() + panels_per_item - 1) / panels_per_item;
  const int row_blocks = (m + block_rows - 1) / block_rows;
  const size_t items = static_cast<size_t>(row_blocks) * static_cast<size_t>(panel_groups);
  // Aim for items of about 25,000 multiply-adds (BRIGADE_GEMM_ITEM_WORK). Decode's products are
  // small (one row against a weight panel that streams from memory), and splitting them over every
  // core is what lets decode use the memory bandwidth of more than one core; the pool's hand-off
  // costs about a microsecond while its workers poll (common/thread_pool.hpp). Items of a million
  // kept such products on one thread: decode at batch 1 ran at ~0.6x of what it does now
  // (docs/cpu_kernels.md).
  const double work_per_item =
      static_cast<double>(std::min(m, block_rows)) * w.cols() * panel_width * panels_per_item;
  const size_t grain =
      static_cast<size_t>(std::max(1.0, item_multiply_adds() / std::max(1.0, work_per_item)));
  auto run = [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const int rb = static_cast<int>(item / static_cast<size_t>(panel_groups));
      const int pg = static_cast<int>(item % static_cast<size_t>(panel_groups));
      const int r0 = rb * block_rows;
      const int p0 = pg * panels_per_item;
      kernel(op, r0, std::min(m, r0 + block_rows), p0, std::min(w.panels(), p0 + panels_per_item));
    }
  };
  pool.parallel_for(items, grain, run);
}

}  // namespace brigade::gpu::cpu

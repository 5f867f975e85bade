#include "gpu/cpu/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// x's rows as the int8 kernels read them (gemm_operands::xq): per row, scale s = largest
// magnitude / 127 and round(x / s) + 128 as a byte, padded with 128 (which the zero padding of the
// weights multiplies away) to whole groups of 4 k.
struct quantized_rows {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  int ld = 0;

  void quantize(const float* x, int ldx, int m, int k, int groups) {
    ld = groups * 4;
    bytes.assign(static_cast<size_t>(m) * static_cast<size_t>(ld), 128);
    scales.assign(static_cast<size_t>(m), 0.0f);
    for (int r = 0; r < m; ++r) {
      const float* row = x + static_cast<size_t>(r) * static_cast<size_t>(ldx);
      float largest = 0.0f;
      for (int i = 0; i < k; ++i)
        largest = std::max(largest, std::fabs(row[i]));
      scales[static_cast<size_t>(r)] = largest / 127.0f;
      const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
      uint8_t* out = bytes.data() + static_cast<size_t>(r) * static_cast<size_t>(ld);
      for (int i = 0; i < k; ++i) {
        const int q = std::clamp(static_cast<int>(std::nearbyint(row[i] * inverse)), -127, 127);
        out[i] = static_cast<uint8_t>(q + 128);
      }
    }
  }
};

// An int8 multiply-add counted against item_multiply_adds(): vpdpbusd does 64 of them an
// instruction where the f32 kernels' fma does 16, from half of bf16's bytes. Counted whole, the
// draft model's small products (a projection of 16-100 KB) were split over both cores, where the
// hand-off cost more than the product: its forward took 0.025 ms instead of 0.020.
constexpr double int8_work_share = 0.25;

gemm_block_fn int8_kernel() {
  return int8_vnni_available() ? gemm_block_int8_vnni : gemm_block_int8;
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
              panels_per_item * static_cast<double>(items) * (p.w->int8() ? int8_work_share : 1.0);
    }
    first[j + 1] = first[j] + items;
  }
  const size_t items = first[count];
  if (items == 0) return;
  const gemm_block_fn kernel = block_kernel(path);
  // Rows of int8 products are quantized once here, not once per work item. Per calling thread:
  // several threads may multiply at once.
  thread_local std::vector<quantized_rows> quantized;
  bool any_int8 = false;
  for (size_t j = 0; j < count; ++j)
    any_int8 = any_int8 || products[j].w->int8();
  if (any_int8) {
    if (quantized.size() < count) quantized.resize(count);
    for (size_t j = 0; j < count; ++j) {
      const gemm_product& p = products[j];
      if (p.w->int8() && p.m > 0) {
        quantized[j].quantize(p.x, p.ldx, p.m, p.w->cols(), p.w->k_groups());
      }
    }
  }
  // The workers read the caller's rows: a thread_local named inside the lambda would be theirs.
  const quantized_rows* rows_of = quantized.data();
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
      gemm_operands op{p.x, p.ldx, p.w, p.bias, p.y, p.ldy};
      gemm_block_fn block = kernel;
      if (p.w->int8()) {
        op.xq = rows_of[j].bytes.data();
        op.ldq = rows_of[j].ld;
        op.x_scale = rows_of[j].scales.data();
        block = int8_kernel();
      }
      const int panel_groups = (p.w->panels() + panels_per_item - 1) / panels_per_item;
      const size_t local = item - first[j];
      const int rb = static_cast<int>(local / static_cast<size_t>(panel_groups));
      const int pg = static_cast<int>(local % static_cast<size_t>(panel_groups));
      const int r0 = rb * block_rows;
      const int p0 = pg * panels_per_item;
      block(op, r0, std::min(p.m, r0 + block_rows), p0,
            std::min(p.w->panels(), p0 + panels_per_item));
    }
  };
  pool.parallel_for(items, grain, run);
}

}  // namespace brigade::gpu::cpu

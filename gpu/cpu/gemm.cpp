#include "gpu/cpu/gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "common/thread_pool.hpp"

namespace brigade::gpu::cpu {
namespace {

// Rows of x per microkernel call: 6 rows x 16 columns use 12 of the 16 AVX2 registers as
// accumulators, leaving room for the two weight vectors and a broadcast.
constexpr int max_tile_rows = 6;

struct f32_panel {
  using elem = float;
  static void load(const float* p, __m256& lo, __m256& hi) {
    lo = _mm256_loadu_ps(p);
    hi = _mm256_loadu_ps(p + 8);
  }
};

struct bf16_panel {
  using elem = uint16_t;
  static void load(const uint16_t* p, __m256& lo, __m256& hi) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i lo32 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(raw));
    const __m256i hi32 = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(raw, 1));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(lo32, 16));
    hi = _mm256_castsi256_ps(_mm256_slli_epi32(hi32, 16));
  }
};

struct f16_panel {
  using elem = uint16_t;
  static void load(const uint16_t* p, __m256& lo, __m256& hi) {
    lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
};

// Cache blocking. Rows come in blocks of block_rows so that a block of x stays in L2 while
// every panel of W streams past it; k comes in blocks of block_k so that the part of a panel in use
// stays in L1 across the row tiles. Partial sums go through y between k blocks: storing and
// reloading a float32 accumulator is exact, so each output is still one FMA chain in k order.
constexpr int block_rows = 72;
constexpr int block_k = 256;
constexpr int panels_per_item = 4;

// One tile: ROWS rows of x against one 16-wide panel, over k in [0, k_count). With `resume`, the
// accumulators start from y (a previous k block); bias is added only by the last k block.
//
// The twelve accumulators are named variables rather than an array: GCC keeps an array of
// vectors in memory and stores it on every iteration, which made the kernel store-bound.
template <class Panel, int ROWS>
void tile(const float* x, int ldx, const typename Panel::elem* panel, int k_count, bool resume,
          const float* bias, float* y, int ldy, int valid_cols) {
  static_assert(ROWS >= 1 && ROWS <= 6, "tiles have 1 to 6 rows");
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  alignas(32) float tmp[panel_width] = {};
  auto load_row = [&](int r, __m256& lo, __m256& hi) {
    std::memcpy(tmp, y + static_cast<ptrdiff_t>(r) * ldy,
                sizeof(float) * static_cast<size_t>(valid_cols));
    lo = _mm256_load_ps(tmp);
    hi = _mm256_load_ps(tmp + 8);
  };
  if (resume) {
    load_row(0, c00, c01);
    if constexpr (ROWS > 1) load_row(1, c10, c11);
    if constexpr (ROWS > 2) load_row(2, c20, c21);
    if constexpr (ROWS > 3) load_row(3, c30, c31);
    if constexpr (ROWS > 4) load_row(4, c40, c41);
    if constexpr (ROWS > 5) load_row(5, c50, c51);
  }
  const float* x0 = x;
  const float* x1 = x + ldx;
  const float* x2 = x + 2 * static_cast<ptrdiff_t>(ldx);
  const float* x3 = x + 3 * static_cast<ptrdiff_t>(ldx);
  const float* x4 = x + 4 * static_cast<ptrdiff_t>(ldx);
  const float* x5 = x + 5 * static_cast<ptrdiff_t>(ldx);
  for (int k = 0; k < k_count; ++k) {
    __m256 w_lo, w_hi;
    Panel::load(panel + static_cast<ptrdiff_t>(k) * panel_width, w_lo, w_hi);
    __m256 xv = _mm256_broadcast_ss(x0 + k);
    c00 = _mm256_fmadd_ps(xv, w_lo, c00);
    c01 = _mm256_fmadd_ps(xv, w_hi, c01);
    if constexpr (ROWS > 1) {
      xv = _mm256_broadcast_ss(x1 + k);
      c10 = _mm256_fmadd_ps(xv, w_lo, c10);
      c11 = _mm256_fmadd_ps(xv, w_hi, c11);
    }
    if constexpr (ROWS > 2) {
      xv = _mm256_broadcast_ss(x2 + k);
      c20 = _mm256_fmadd_ps(xv, w_lo, c20);
      c21 = _mm256_fmadd_ps(xv, w_hi, c21);
    }
    if constexpr (ROWS > 3) {
      xv = _mm256_broadcast_ss(x3 + k);
      c30 = _mm256_fmadd_ps(xv, w_lo, c30);
      c31 = _mm256_fmadd_ps(xv, w_hi, c31);
    }
    if constexpr (ROWS > 4) {
      xv = _mm256_broadcast_ss(x4 + k);
      c40 = _mm256_fmadd_ps(xv, w_lo, c40);
      c41 = _mm256_fmadd_ps(xv, w_hi, c41);
    }
    if constexpr (ROWS > 5) {
      xv = _mm256_broadcast_ss(x5 + k);
      c50 = _mm256_fmadd_ps(xv, w_lo, c50);
      c51 = _mm256_fmadd_ps(xv, w_hi, c51);
    }
  }
  __m256 b_lo = _mm256_setzero_ps(), b_hi = b_lo;
  if (bias) {
    alignas(32) float b[panel_width] = {};
    std::memcpy(b, bias, sizeof(float) * static_cast<size_t>(valid_cols));
    b_lo = _mm256_load_ps(b);
    b_hi = _mm256_load_ps(b + 8);
  }
  auto store_row = [&](int r, __m256 lo, __m256 hi) {
    if (bias) {
      lo = _mm256_add_ps(lo, b_lo);
      hi = _mm256_add_ps(hi, b_hi);
    }
    float* out = y + static_cast<ptrdiff_t>(r) * ldy;
    if (valid_cols == panel_width) {
      _mm256_storeu_ps(out, lo);
      _mm256_storeu_ps(out + 8, hi);
    } else {
      _mm256_store_ps(tmp, lo);
      _mm256_store_ps(tmp + 8, hi);
      std::memcpy(out, tmp, sizeof(float) * static_cast<size_t>(valid_cols));
    }
  };
  store_row(0, c00, c01);
  if constexpr (ROWS > 1) store_row(1, c10, c11);
  if constexpr (ROWS > 2) store_row(2, c20, c21);
  if constexpr (ROWS > 3) store_row(3, c30, c31);
  if constexpr (ROWS > 4) store_row(4, c40, c41);
  if constexpr (ROWS > 5) store_row(5, c50, c51);
}

template <class Panel>
void tile_rows(int rows, const float* x, int ldx, const typename Panel::elem* panel, int k_count,
               bool resume, const float* bias, float* y, int ldy, int valid_cols) {
  switch (rows) {
    case 6:
      return tile<Panel, 6>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
    case 5:
      return tile<Panel, 5>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
    case 4:
      return tile<Panel, 4>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
    case 3:
      return tile<Panel, 3>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
    case 2:
      return tile<Panel, 2>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
    default:
      return tile<Panel, 1>(x, ldx, panel, k_count, resume, bias, y, ldy, valid_cols);
  }
}

// One work item: rows [row_begin, row_end) against panels [panel_begin, panel_end).
template <class Panel>
void gemm_block(const float* x, int ldx, const packed_matrix& w, const float* bias, float* y,
                int ldy, int row_begin, int row_end, int panel_begin, int panel_end) {
  const int k_total = w.cols();
  for (int k0 = 0; k0 < k_total; k0 += block_k) {
    const int k_count = std::min(block_k, k_total - k0);
    const bool last_k = k0 + k_count == k_total;
    for (int p = panel_begin; p < panel_end; ++p) {
      const auto* panel = static_cast<const typename Panel::elem*>(w.panel(p)) +
                          static_cast<ptrdiff_t>(k0) * panel_width;
      const int col = p * panel_width;
      const int valid = std::min(panel_width, w.rows() - col);
      const float* b = bias && last_k ? bias + col : nullptr;
      for (int r = row_begin; r < row_end; r += max_tile_rows) {
        const int rows = std::min(max_tile_rows, row_end - r);
        tile_rows<Panel>(rows, x + static_cast<ptrdiff_t>(r) * ldx + k0, ldx, panel, k_count,
                         k0 > 0, b, y + static_cast<ptrdiff_t>(r) * ldy + col, ldy, valid);
      }
    }
  }
}

}  // namespace

void gemm(const float* x, int ldx, int m, const packed_matrix& w, const float* bias, float* y,
          int ldy, thread_pool& pool) {
  if (m <= 0) return;
  const int panel_groups = (w.panels() + panels_per_item - 1) / panels_per_item;
  const int row_blocks = (m + block_rows - 1) / block_rows;
  const size_t items = static_cast<size_t>(row_blocks) * static_cast<size_t>(panel_groups);
  // Aim for items of about a million multiply-adds so that small products stay on one thread.
  const double work_per_item =
      static_cast<double>(std::min(m, block_rows)) * w.cols() * panel_width * panels_per_item;
  const size_t grain = static_cast<size_t>(std::max(1.0, 1.0e6 / std::max(1.0, work_per_item)));
  auto run = [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const int rb = static_cast<int>(item / static_cast<size_t>(panel_groups));
      const int pg = static_cast<int>(item % static_cast<size_t>(panel_groups));
      const int r0 = rb * block_rows;
      const int r1 = std::min(m, r0 + block_rows);
      const int p0 = pg * panels_per_item;
      const int p1 = std::min(w.panels(), p0 + panels_per_item);
      switch (w.type()) {
        case dtype::f32:
          gemm_block<f32_panel>(x, ldx, w, bias, y, ldy, r0, r1, p0, p1);
          break;
        case dtype::bf16:
          gemm_block<bf16_panel>(x, ldx, w, bias, y, ldy, r0, r1, p0, p1);
          break;
        case dtype::f16:
          gemm_block<f16_panel>(x, ldx, w, bias, y, ldy, r0, r1, p0, p1);
          break;
      }
    }
  };
  pool.parallel_for(items, grain, run);
}

}  // namespace brigade::gpu::cpu

// The AVX2/FMA matmul kernel: the baseline path, which every x86-64-v3 machine runs. A 16-column
// weight panel is two ymm registers. Tiles of 3 to 6 rows cover one panel (up to 12 accumulators
// of the 16 registers); tiles of 1 or 2 rows, as decode's matmuls mostly are, cover 4 or 2 panels
// instead, so that 8 independent FMA chains are in flight rather than one row's two.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "gpu/cpu/gemm_kernels.hpp"

namespace brigade::gpu::cpu {
namespace {

constexpr int max_tile_rows = 6;
constexpr int panel_group = 4;  // panels a tile of one row covers
// The part of a panel group in use (4 panels x 256 k x 32 bytes for bf16) stays in L1 across the
// row tiles of a block. Partial sums go through y between blocks of k (exact, gemm_kernels.hpp).
constexpr int block_k = 256;

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

// Where a tile reads and writes: rows of x from `x`, panels from `panel` (each `panel_stride`
// elements after the previous), y from `y`. Only the last panel may have fewer than 16 valid
// columns: lanes of `last_lo` and `last_hi` are all ones for its valid columns.
template <class Panel>
struct tile_args {
  const float* x;
  int ldx;
  const typename Panel::elem* panel;
  ptrdiff_t panel_stride;
  int k_count;
  bool resume;        // start from the partial sums in y (an earlier block of k)
  const float* bias;  // added by the last block of k only; null otherwise
  float* y;
  int ldy;
  __m256i last_lo, last_hi;
};

constexpr int full_lanes = -1;

template <class Panel>
__m256i lane_mask(const tile_args<Panel>& a, int q, int panels, int half) {
  if (q < panels - 1) return _mm256_set1_epi32(full_lanes);
  return half ? a.last_hi : a.last_lo;
}

// ROWS rows by PANELS panels. The accumulators are an array that full unrolling turns into
// registers: every index is a compile-time constant once the loops are unrolled.
template <class Panel, int ROWS, int PANELS>
void tile(const tile_args<Panel>& a) {
  static_assert(ROWS * PANELS * 2 <= 12, "a tile keeps at most 12 accumulators");
  __m256 acc[ROWS][PANELS][2];
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
#pragma GCC unroll 8
    for (int i = 0; i < PANELS * 2; ++i) {
      const int q = i / 2, h = i % 2;
      float* y = a.y + r * a.ldy + q * panel_width + h * 8;
      acc[r][q][h] =
          a.resume ? _mm256_maskload_ps(y, lane_mask(a, q, PANELS, h)) : _mm256_setzero_ps();
    }
  }
  const typename Panel::elem* w = a.panel;
  for (int k = 0; k < a.k_count; ++k, w += panel_width) {
#pragma GCC unroll 4
    for (int q = 0; q < PANELS; ++q) {
      __m256 lo, hi;
      Panel::load(w + q * a.panel_stride, lo, hi);
#pragma GCC unroll 8
      for (int r = 0; r < ROWS; ++r) {
        const __m256 xv = _mm256_broadcast_ss(a.x + r * a.ldx + k);
        acc[r][q][0] = _mm256_fmadd_ps(xv, lo, acc[r][q][0]);
        acc[r][q][1] = _mm256_fmadd_ps(xv, hi, acc[r][q][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < PANELS * 2; ++i) {
    const int q = i / 2, h = i % 2;
    const __m256i mask = lane_mask(a, q, PANELS, h);
    const int col = q * panel_width + h * 8;
    const __m256 b = a.bias ? _mm256_maskload_ps(a.bias + col, mask) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m256 out = a.bias ? _mm256_add_ps(acc[r][q][h], b) : acc[r][q][h];
      _mm256_maskstore_ps(a.y + r * a.ldy + col, mask, out);
    }
  }
}

template <class Panel>
void one_panel_tile(int rows, const tile_args<Panel>& a) {
  switch (rows) {
    case 6:
      return tile<Panel, 6, 1>(a);
    case 5:
      return tile<Panel, 5, 1>(a);
    case 4:
      return tile<Panel, 4, 1>(a);
    case 3:
      return tile<Panel, 3, 1>(a);
    case 2:
      return tile<Panel, 2, 1>(a);
    default:
      return tile<Panel, 1, 1>(a);
  }
}

// Rows [0, rows) of a tile against the `panels` panels of its group: one tile of one row by four
// panels, tiles of one or two rows by two panels, or tiles of one panel.
template <class Panel>
void tile_group(int rows, int panels, tile_args<Panel> a) {
  if (rows == 1 && panels == panel_group) return tile<Panel, 1, panel_group>(a);
  const int step = rows <= 2 && panels % 2 == 0 ? 2 : 1;
  const tile_args<Panel> whole = a;
  for (int q = 0; q < panels; q += step) {
    a.panel = whole.panel + q * whole.panel_stride;
    a.y = whole.y + q * panel_width;
    a.bias = whole.bias ? whole.bias + q * panel_width : nullptr;
    const bool last = q + step == panels;
    a.last_lo = last ? whole.last_lo : _mm256_set1_epi32(full_lanes);
    a.last_hi = last ? whole.last_hi : _mm256_set1_epi32(full_lanes);
    if (step == 1) {
      one_panel_tile(rows, a);
    } else if (rows == 1) {
      tile<Panel, 1, 2>(a);
    } else {
      tile<Panel, 2, 2>(a);
    }
  }
}

template <class Panel>
void gemm_block(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                int panel_end) {
  const packed_matrix& w = *op.w;
  const int k_total = w.cols();
  for (int k0 = 0; k0 < k_total; k0 += block_k) {
    const int k_count = std::min(block_k, k_total - k0);
    const bool last_k = k0 + k_count == k_total;
    for (int p = panel_begin; p < panel_end; p += panel_group) {
      const int panels = std::min(panel_group, panel_end - p);
      const int col = p * panel_width;
      const int valid = std::min(panels * panel_width, w.rows() - col) - (panels - 1) * panel_width;
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      tile_args<Panel> a{};
      a.panel = static_cast<const typename Panel::elem*>(w.panel(p)) +
                static_cast<ptrdiff_t>(k0) * panel_width;
      a.panel_stride = static_cast<ptrdiff_t>(k_total) * panel_width;
      a.k_count = k_count;
      a.resume = k0 > 0;
      a.bias = op.bias && last_k ? op.bias + col : nullptr;
      a.ldx = op.ldx;
      a.ldy = op.ldy;
      a.last_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane);
      a.last_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid - 8), lane);
      for (int r = row_begin; r < row_end; r += max_tile_rows) {
        a.x = op.x + static_cast<ptrdiff_t>(r) * op.ldx + k0;
        a.y = op.y + static_cast<ptrdiff_t>(r) * op.ldy + col;
        tile_group(std::min(max_tile_rows, row_end - r), panels, a);
      }
    }
  }
}

}  // namespace

void gemm_block_avx2(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                     int panel_end) {
  switch (op.w->type()) {
    case dtype::f32:
      return gemm_block<f32_panel>(op, row_begin, row_end, panel_begin, panel_end);
    case dtype::bf16:
      return gemm_block<bf16_panel>(op, row_begin, row_end, panel_begin, panel_end);
    case dtype::f16:
      return gemm_block<f16_panel>(op, row_begin, row_end, panel_begin, panel_end);
  }
}

}  // namespace brigade::gpu::cpu

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

// One tile: ROWS rows of x against one 16-wide panel, over all k.
template <class Panel, int ROWS>
void tile(const float* x, int ldx, const typename Panel::elem* panel, int k_count,
          const float* bias, float* y, int ldy, int valid_cols) {
  __m256 acc[ROWS][2];
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < k_count; ++k) {
    __m256 w_lo, w_hi;
    Panel::load(panel + static_cast<ptrdiff_t>(k) * panel_width, w_lo, w_hi);
    for (int r = 0; r < ROWS; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + static_cast<ptrdiff_t>(r) * ldx + k);
      acc[r][0] = _mm256_fmadd_ps(xv, w_lo, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xv, w_hi, acc[r][1]);
    }
  }
  if (bias) {
    alignas(32) float b[panel_width] = {};
    std::memcpy(b, bias, sizeof(float) * static_cast<size_t>(valid_cols));
    const __m256 b_lo = _mm256_load_ps(b);
    const __m256 b_hi = _mm256_load_ps(b + 8);
    for (int r = 0; r < ROWS; ++r) {
      acc[r][0] = _mm256_add_ps(acc[r][0], b_lo);
      acc[r][1] = _mm256_add_ps(acc[r][1], b_hi);
    }
  }
  for (int r = 0; r < ROWS; ++r) {
    float* out = y + static_cast<ptrdiff_t>(r) * ldy;
    if (valid_cols == panel_width) {
      _mm256_storeu_ps(out, acc[r][0]);
      _mm256_storeu_ps(out + 8, acc[r][1]);
    } else {
      alignas(32) float tmp[panel_width];
      _mm256_store_ps(tmp, acc[r][0]);
      _mm256_store_ps(tmp + 8, acc[r][1]);
      std::memcpy(out, tmp, sizeof(float) * static_cast<size_t>(valid_cols));
    }
  }
}

template <class Panel>
void tile_rows(int rows, const float* x, int ldx, const typename Panel::elem* panel, int k_count,
               const float* bias, float* y, int ldy, int valid_cols) {
  switch (rows) {
    case 6:
      return tile<Panel, 6>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
    case 5:
      return tile<Panel, 5>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
    case 4:
      return tile<Panel, 4>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
    case 3:
      return tile<Panel, 3>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
    case 2:
      return tile<Panel, 2>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
    default:
      return tile<Panel, 1>(x, ldx, panel, k_count, bias, y, ldy, valid_cols);
  }
}

template <class Panel>
void gemm_panels(const float* x, int ldx, int m, const packed_matrix& w, const float* bias,
                 float* y, int ldy, int panel_begin, int panel_end) {
  const int k_count = w.cols();
  for (int p = panel_begin; p < panel_end; ++p) {
    const auto* panel = static_cast<const typename Panel::elem*>(w.panel(p));
    const int col = p * panel_width;
    const int valid = std::min(panel_width, w.rows() - col);
    const float* b = bias ? bias + col : nullptr;
    for (int r = 0; r < m; r += max_tile_rows) {
      const int rows = std::min(max_tile_rows, m - r);
      tile_rows<Panel>(rows, x + static_cast<ptrdiff_t>(r) * ldx, ldx, panel, k_count, b,
                       y + static_cast<ptrdiff_t>(r) * ldy + col, ldy, valid);
    }
  }
}

}  // namespace

void gemm(const float* x, int ldx, int m, const packed_matrix& w, const float* bias, float* y,
          int ldy, thread_pool& pool) {
  if (m <= 0) return;
  const int panels = w.panels();
  // Aim for chunks of about a million multiply-adds so that small products stay on one thread.
  const double work_per_panel = static_cast<double>(m) * w.cols() * panel_width;
  const size_t grain = static_cast<size_t>(std::max(1.0, 1.0e6 / std::max(1.0, work_per_panel)));
  auto run = [&](size_t begin, size_t end) {
    const int pb = static_cast<int>(begin);
    const int pe = static_cast<int>(end);
    switch (w.type()) {
      case dtype::f32:
        return gemm_panels<f32_panel>(x, ldx, m, w, bias, y, ldy, pb, pe);
      case dtype::bf16:
        return gemm_panels<bf16_panel>(x, ldx, m, w, bias, y, ldy, pb, pe);
      case dtype::f16:
        return gemm_panels<f16_panel>(x, ldx, m, w, bias, y, ldy, pb, pe);
    }
  };
  pool.parallel_for(static_cast<size_t>(panels), grain, run);
}

}  // namespace brigade::gpu::cpu

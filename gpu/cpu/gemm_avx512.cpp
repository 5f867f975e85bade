// The AVX-512F matmul kernel. A 16-column weight panel is exactly one zmm register, so a tile
// keeps up to 6 rows by 4 panels of accumulators (24 of the 32 registers) and each weight load
// serves 6 rows, each broadcast of x 4 panels. It performs, per output element, the same fused
// multiply-adds in the same order as the AVX2 kernel (gemm_kernels.hpp), so it gives the same
// bits. At one row, the four panels' chains run side by side, where the AVX2 kernel waits on
// one FMA chain's latency.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "gpu/cpu/gemm_kernels.hpp"

// Every function defined below is compiled for AVX-512F. The headers come first so that the
// inline functions they define keep the baseline target: a copy compiled for AVX-512 could be the
// one the linker keeps for the whole program.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector, which its
// -Wmaybe-uninitialized reports at every inlined use (a known GCC 12 false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace brigade::gpu::cpu {
namespace {

constexpr int max_tile_rows = 6;
constexpr int tile_panels = 4;
// The part of a tile's panels in use (4 panels x 256 k x 32 bytes for bf16) stays in L1 across
// the row tiles of a block.
constexpr int block_k = 256;

struct f32_panel {
  using elem = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
};

struct bf16_panel {
  using elem = uint16_t;
  static __m512 load(const uint16_t* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  }
};

struct f16_panel {
  using elem = uint16_t;
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

// Where a tile reads and writes: ROWS rows of x from `x`, PANELS panels from `panel` (each
// `panel_stride` elements after the previous), y from `y`. Only the last panel may have fewer
// than 16 valid columns: `last_mask` has a bit per valid column of it.
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
  __mmask16 last_mask;
};

// The accumulators are an array that full unrolling turns into registers: every index below is a
// compile-time constant once the loops over ROWS and PANELS are unrolled.
template <class Panel, int ROWS, int PANELS>
void tile(const tile_args<Panel>& a) {
  static_assert(ROWS >= 1 && ROWS <= max_tile_rows && PANELS >= 1 && PANELS <= tile_panels,
                "tiles have 1 to 6 rows and 1 to 4 panels");
  auto mask = [&](int q) -> __mmask16 { return q == PANELS - 1 ? a.last_mask : 0xffff; };
  __m512 acc[ROWS][PANELS];
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < PANELS; ++q) {
      acc[r][q] = a.resume ? _mm512_maskz_loadu_ps(mask(q), a.y + r * a.ldy + q * panel_width)
                           : _mm512_setzero_ps();
    }
  }
  const typename Panel::elem* w = a.panel;
  for (int k = 0; k < a.k_count; ++k, w += panel_width) {
    __m512 wv[PANELS];
#pragma GCC unroll 4
    for (int q = 0; q < PANELS; ++q)
      wv[q] = Panel::load(w + q * a.panel_stride);
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m512 xv = _mm512_set1_ps(a.x[r * a.ldx + k]);
#pragma GCC unroll 4
      for (int q = 0; q < PANELS; ++q)
        acc[r][q] = _mm512_fmadd_ps(xv, wv[q], acc[r][q]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < PANELS; ++q) {
    const __m512 b =
        a.bias ? _mm512_maskz_loadu_ps(mask(q), a.bias + q * panel_width) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m512 out = a.bias ? _mm512_add_ps(acc[r][q], b) : acc[r][q];
      _mm512_mask_storeu_ps(a.y + r * a.ldy + q * panel_width, mask(q), out);
    }
  }
}

template <class Panel, int PANELS>
void tile_rows(int rows, const tile_args<Panel>& a) {
  switch (rows) {
    case 6:
      return tile<Panel, 6, PANELS>(a);
    case 5:
      return tile<Panel, 5, PANELS>(a);
    case 4:
      return tile<Panel, 4, PANELS>(a);
    case 3:
      return tile<Panel, 3, PANELS>(a);
    case 2:
      return tile<Panel, 2, PANELS>(a);
    default:
      return tile<Panel, 1, PANELS>(a);
  }
}

template <class Panel>
void gemm_block(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                int panel_end) {
  const packed_matrix& w = *op.w;
  const int k_total = w.cols();
  const ptrdiff_t panel_stride = static_cast<ptrdiff_t>(k_total) * panel_width;
  for (int k0 = 0; k0 < k_total; k0 += block_k) {
    const int k_count = std::min(block_k, k_total - k0);
    const bool last_k = k0 + k_count == k_total;
    for (int p = panel_begin; p < panel_end;) {
      const int panels = panel_end - p >= tile_panels ? tile_panels : 1;
      const int col = p * panel_width;
      const int valid = std::min(panels * panel_width, w.rows() - col) - (panels - 1) * panel_width;
      tile_args<Panel> a{};
      a.panel = static_cast<const typename Panel::elem*>(w.panel(p)) +
                static_cast<ptrdiff_t>(k0) * panel_width;
      a.panel_stride = panel_stride;
      a.k_count = k_count;
      a.resume = k0 > 0;
      a.bias = op.bias && last_k ? op.bias + col : nullptr;
      a.ldx = op.ldx;
      a.ldy = op.ldy;
      a.last_mask = static_cast<__mmask16>((1u << valid) - 1u);
      for (int r = row_begin; r < row_end; r += max_tile_rows) {
        const int rows = std::min(max_tile_rows, row_end - r);
        a.x = op.x + static_cast<ptrdiff_t>(r) * op.ldx + k0;
        a.y = op.y + static_cast<ptrdiff_t>(r) * op.ldy + col;
        if (panels == tile_panels) {
          tile_rows<Panel, tile_panels>(rows, a);
        } else {
          tile_rows<Panel, 1>(rows, a);
        }
      }
      p += panels;
    }
  }
}

}  // namespace

void gemm_block_avx512(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
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

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

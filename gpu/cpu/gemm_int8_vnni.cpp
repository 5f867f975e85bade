// The int8 matmul on AVX512-VNNI: a panel's 16 rows of a group of 4 k are one zmm (64 bytes), so
// one vpdpbusd adds 4 products into each of 16 int32 sums; up to 4 panels run side by side for a
// row. The sums are exact, and the scaling is gemm_block_int8's, so it gives its bits.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gpu/cpu/gemm_kernels.hpp"

// As in gemm_avx512.cpp: the headers first, so their inline functions keep the baseline target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace brigade::gpu::cpu {

void gemm_block_int8_vnni(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                          int panel_end) {
  const packed_matrix& w = *op.w;
  const int groups = w.k_groups();
  const int panels = panel_end - panel_begin;
  for (int r = row_begin; r < row_end; ++r) {
    const uint8_t* x = op.xq + static_cast<size_t>(r) * static_cast<size_t>(op.ldq);
    for (int p0 = 0; p0 < panels; p0 += 4) {
      const int count = std::min(4, panels - p0);
      __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
      const int8_t* panel[4];
      for (int q = 0; q < count; ++q)
        panel[q] = w.int8_panel(panel_begin + p0 + q);
      for (int g = 0; g < groups; ++g) {
        int32_t four;
        std::memcpy(&four, x + g * 4, 4);
        const __m512i xs = _mm512_set1_epi32(four);
        for (int q = 0; q < count; ++q) {
          acc[q] = _mm512_dpbusd_epi32(acc[q], xs, _mm512_loadu_si512(panel[q] + g * 64));
        }
      }
      const __m512 xscale = _mm512_set1_ps(op.x_scale[r]);
      for (int q = 0; q < count; ++q) {
        const int n0 = (panel_begin + p0 + q) * panel_width;
        const __m512i exact =
            _mm512_sub_epi32(acc[q], _mm512_slli_epi32(_mm512_loadu_si512(w.row_sums() + n0), 7));
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(exact),
                                 _mm512_mul_ps(xscale, _mm512_loadu_ps(w.row_scales() + n0)));
        const int lanes = std::min(panel_width, w.rows() - n0);
        const __mmask16 mask = static_cast<__mmask16>((1u << lanes) - 1u);
        if (op.bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, op.bias + n0));
        _mm512_mask_storeu_ps(op.y + static_cast<size_t>(r) * static_cast<size_t>(op.ldy) + n0,
                              mask, v);
      }
    }
  }
}

}  // namespace brigade::gpu::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

// The int8 matmul on AVX512-VNNI: a panel's 16 rows of a group of 4 k are one zmm (64 bytes), so
// one vpdpbusd adds 4 products into each of 16 int32 sums; up to 4 panels run side by side for a
// row, each with two chains of sums in registers. The sums are exact, and the scaling is
// gemm_block_int8's, so it gives its bits.
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
// GCC 12 reports its own intrinsics (the undefined operand of _mm512_slli_epi32) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace brigade::gpu::cpu {

namespace {

// `count` panels (1-4, a compile-time constant so that every sum stays in a register) of one
// row. Each panel keeps two sums, for even and odd groups of k, so that consecutive vpdpbusd
// do not wait on each other's result; int32 sums are exact, so splitting them changes no bit.
template <int count>
void panels_of_row(const gemm_operands& op, const uint8_t* x, int r, int first_panel, int groups) {
  const packed_matrix& w = *op.w;
  __m512i even[count], odd[count];
  const int8_t* panel[count];
  for (int q = 0; q < count; ++q) {
    even[q] = _mm512_setzero_si512();
    odd[q] = _mm512_setzero_si512();
    panel[q] = w.int8_panel(first_panel + q);
  }
  int g = 0;
  for (; g + 2 <= groups; g += 2) {
    int32_t four_even, four_odd;
    std::memcpy(&four_even, x + g * 4, 4);
    std::memcpy(&four_odd, x + g * 4 + 4, 4);
    const __m512i xe = _mm512_set1_epi32(four_even), xo = _mm512_set1_epi32(four_odd);
    for (int q = 0; q < count; ++q) {
      even[q] = _mm512_dpbusd_epi32(even[q], xe, _mm512_loadu_si512(panel[q] + g * 64));
      odd[q] = _mm512_dpbusd_epi32(odd[q], xo, _mm512_loadu_si512(panel[q] + g * 64 + 64));
    }
  }
  if (g < groups) {
    int32_t four;
    std::memcpy(&four, x + g * 4, 4);
    const __m512i xs = _mm512_set1_epi32(four);
    for (int q = 0; q < count; ++q)
      even[q] = _mm512_dpbusd_epi32(even[q], xs, _mm512_loadu_si512(panel[q] + g * 64));
  }
  const __m512 xscale = _mm512_set1_ps(op.x_scale[r]);
  for (int q = 0; q < count; ++q) {
    const int n0 = (first_panel + q) * panel_width;
    const __m512i sum = _mm512_add_epi32(even[q], odd[q]);
    const __m512i exact =
        _mm512_sub_epi32(sum, _mm512_slli_epi32(_mm512_loadu_si512(w.row_sums() + n0), 7));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(exact),
                             _mm512_mul_ps(xscale, _mm512_loadu_ps(w.row_scales() + n0)));
    const int lanes = std::min(panel_width, w.rows() - n0);
    const __mmask16 mask = static_cast<__mmask16>((1u << lanes) - 1u);
    if (op.bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, op.bias + n0));
    _mm512_mask_storeu_ps(op.y + static_cast<size_t>(r) * static_cast<size_t>(op.ldy) + n0, mask,
                          v);
  }
}

}  // namespace

void gemm_block_int8_vnni(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                          int panel_end) {
  const int groups = op.w->k_groups();
  for (int r = row_begin; r < row_end; ++r) {
    const uint8_t* x = op.xq + static_cast<size_t>(r) * static_cast<size_t>(op.ldq);
    int p = panel_begin;
    for (; p + 4 <= panel_end; p += 4)
      panels_of_row<4>(op, x, r, p, groups);
    switch (panel_end - p) {
      case 3:
        panels_of_row<3>(op, x, r, p, groups);
        break;
      case 2:
        panels_of_row<2>(op, x, r, p, groups);
        break;
      case 1:
        panels_of_row<1>(op, x, r, p, groups);
        break;
      default:
        break;
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

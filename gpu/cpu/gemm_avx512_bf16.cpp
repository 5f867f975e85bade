// The AVX512-BF16 matmul kernel: bf16 weights times activations rounded to bf16, two k at a time
// with vdpbf16ps (32 multiply-adds an instruction where an FMA does 16). It is its own numerics
// class (kernel_numerics::bf16_dot): the activations lose their low 16 bits, so its outputs are
// not the exact paths' bits. What it keeps is the contract's shape: each output element is one
// chain in a fixed order, whatever the tile, batch or thread,
//   acc = +0; for each pair p of k (2p, 2p + 1), in order:
//     acc += bf16(x[2p + 1]) * W[n][2p + 1];  acc += bf16(x[2p]) * W[n][2p]   (each add rounded)
// with a missing odd partner taken as +0, bf16() rounding to nearest even, denormal inputs and
// results flushed to zero (the instruction's DAZ/FTZ), then + bias[n]. So a row's result never
// depends on its batch. f32 and f16 weights run the exact avx512 kernel.
//
// The packed panel stores, for each k, 16 output features' weights (32 bytes of bf16). A pair of
// k is therefore 64 adjacent bytes: one load, and one vpermw interleaves them into the
// (k, k + 1) pairs per feature that vdpbf16ps multiplies. No repacking of the weights.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/cpu/gemm_kernels.hpp"

// As in gemm_avx512.cpp: the target applies to the functions defined below only, after every
// header, so no inline function of a header is compiled for AVX-512.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace brigade::gpu::cpu {
namespace {

constexpr int max_tile_rows = 6;
constexpr int tile_panels = 4;
constexpr int block_k = 256;  // even: a pair of k never straddles two blocks

// Rows [row_begin, row_end) of x as bf16 pairs: pairs[r][p] = bf16(x[r][2p]) | bf16(x[r][2p+1])
// << 16, the odd partner of an odd k count +0. One buffer per thread, reused across calls.
struct x_pairs {
  std::vector<uint32_t> words;
  int stride = 0;  // pairs per row

  void fill(const gemm_operands& op, int row_begin, int row_end) {
    const int k = op.w->cols();
    stride = (k + 1) / 2;
    words.resize(static_cast<size_t>(row_end - row_begin) * static_cast<size_t>(stride));
    for (int r = row_begin; r < row_end; ++r) {
      const float* x = op.x + static_cast<ptrdiff_t>(r) * op.ldx;
      uint32_t* out = words.data() + static_cast<ptrdiff_t>(r - row_begin) * stride;
      int i = 0;
      for (; i + 32 <= k; i += 32) {
        // vcvtne2ps2bf16 puts its second operand in the low half.
        const __m512bh both =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(out + i / 2, reinterpret_cast<__m512i>(both));
      }
      for (; i < k; i += 16) {
        const int n = std::min(16, k - i);
        const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), x + i);
        const __m256bh half = _mm512_cvtneps_pbh(v);
        // Odd n leaves its partner zero: the masked load read +0 there.
        _mm256_mask_storeu_epi16(out + i / 2, static_cast<__mmask16>((1u << ((n + 1) & ~1)) - 1u),
                                 reinterpret_cast<__m256i>(half));
      }
    }
  }
};

// Word 2n of the result is word n of the panel pair (k's feature n), word 2n + 1 is word 16 + n
// (k + 1's feature n).
__m512i interleave_index() {
  alignas(64) uint16_t idx[32];
  for (int n = 0; n < 16; ++n) {
    idx[2 * n] = static_cast<uint16_t>(n);
    idx[2 * n + 1] = static_cast<uint16_t>(16 + n);
  }
  return _mm512_load_si512(idx);
}

struct tile_args {
  const uint32_t* x;  // the tile's first row of pairs, at the block's first pair
  int ldx;            // pairs per row
  const uint16_t* panel;
  ptrdiff_t panel_stride;
  int k_count;  // k in this block; odd only in the last block
  bool resume;
  const float* bias;
  float* y;
  int ldy;
  __mmask16 last_mask;
};

template <int ROWS, int PANELS>
void tile(const tile_args& a, __m512i perm) {
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
  const int pairs = a.k_count / 2;
  const uint16_t* w = a.panel;
  for (int p = 0; p < pairs; ++p, w += 2 * panel_width) {
    __m512bh wv[PANELS];
#pragma GCC unroll 4
    for (int q = 0; q < PANELS; ++q) {
      const __m512i raw = _mm512_loadu_si512(w + q * a.panel_stride);
      wv[q] = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(perm, raw));
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh xv =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a.x[r * a.ldx + p])));
#pragma GCC unroll 4
      for (int q = 0; q < PANELS; ++q)
        acc[r][q] = _mm512_dpbf16_ps(acc[r][q], xv, wv[q]);
    }
  }
  if (a.k_count % 2) {
    // The last k alone: its 32 bytes widened so that every odd word (the missing k + 1) is 0.
    __m512bh wv[PANELS];
#pragma GCC unroll 4
    for (int q = 0; q < PANELS; ++q) {
      const __m256i raw =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + q * a.panel_stride));
      wv[q] = reinterpret_cast<__m512bh>(_mm512_cvtepu16_epi32(raw));
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh xv =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a.x[r * a.ldx + pairs])));
#pragma GCC unroll 4
      for (int q = 0; q < PANELS; ++q)
        acc[r][q] = _mm512_dpbf16_ps(acc[r][q], xv, wv[q]);
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

template <int PANELS>
void tile_rows(int rows, const tile_args& a, __m512i perm) {
  switch (rows) {
    case 6:
      return tile<6, PANELS>(a, perm);
    case 5:
      return tile<5, PANELS>(a, perm);
    case 4:
      return tile<4, PANELS>(a, perm);
    case 3:
      return tile<3, PANELS>(a, perm);
    case 2:
      return tile<2, PANELS>(a, perm);
    default:
      return tile<1, PANELS>(a, perm);
  }
}

void gemm_block_bf16_dot(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                         int panel_end, int k_begin) {
  thread_local x_pairs xp;
  xp.fill(op, row_begin, row_end);
  const __m512i perm = interleave_index();
  const packed_matrix& w = *op.w;
  const int k_total = w.cols();
  const ptrdiff_t panel_stride = static_cast<ptrdiff_t>(k_total) * panel_width;
  for (int k0 = k_begin; k0 < k_total; k0 += block_k) {
    const int k_count = std::min(block_k, k_total - k0);
    const bool last_k = k0 + k_count == k_total;
    for (int p = panel_begin; p < panel_end;) {
      const int panels = panel_end - p >= tile_panels ? tile_panels : 1;
      const int col = p * panel_width;
      const int valid = std::min(panels * panel_width, w.rows() - col) - (panels - 1) * panel_width;
      tile_args a{};
      a.panel = static_cast<const uint16_t*>(w.panel(p)) + static_cast<ptrdiff_t>(k0) * panel_width;
      a.panel_stride = panel_stride;
      a.k_count = k_count;
      a.resume = k0 > 0;
      a.bias = op.bias && last_k ? op.bias + col : nullptr;
      a.ldx = xp.stride;
      a.ldy = op.ldy;
      a.last_mask = static_cast<__mmask16>((1u << valid) - 1u);
      for (int r = row_begin; r < row_end; r += max_tile_rows) {
        const int rows = std::min(max_tile_rows, row_end - r);
        a.x = xp.words.data() + static_cast<ptrdiff_t>(r - row_begin) * xp.stride + k0 / 2;
        a.y = op.y + static_cast<ptrdiff_t>(r) * op.ldy + col;
        if (panels == tile_panels) {
          tile_rows<tile_panels>(rows, a, perm);
        } else {
          tile_rows<1>(rows, a, perm);
        }
      }
      p += panels;
    }
  }
}

}  // namespace

void gemm_block_avx512_bf16(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                            int panel_end) {
  if (op.w->type() == dtype::bf16) {
    return gemm_block_bf16_dot(op, row_begin, row_end, panel_begin, panel_end, 0);
  }
  gemm_block_avx512(op, row_begin, row_end, panel_begin, panel_end);
}

void gemm_bf16_pairs_odd_low(const float* x, int k, uint32_t* out) {
  for (int i = 0; i < k; i += 32) {
    const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    // Each dword holds (x[2p], x[2p + 1]) from low to high: rotating by 16 bits swaps them.
    _mm512_storeu_si512(out + i / 2, _mm512_rol_epi32(reinterpret_cast<__m512i>(both), 16));
  }
}

void gemm_block_avx512_bf16_from(const gemm_operands& op, int row_begin, int row_end,
                                 int panel_begin, int panel_end, int k_begin) {
  gemm_block_bf16_dot(op, row_begin, row_end, panel_begin, panel_end, k_begin);
}

}  // namespace brigade::gpu::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

// The matmul's per-instruction-set kernels, behind gemm() (gemm.cpp splits the work and calls
// one of these per work item). Private to gpu/cpu.
//
// The contract every exact kernel keeps (the f32 numerics class), whatever its tiles and blocking:
// output y[r][n] is
//   fma(x[r][K-1], W[n][K-1], ... fma(x[r][1], W[n][1], fma(x[r][0], W[n][0], +0.0f)) ...)
// with every weight widened exactly to float32, then + bias[n] (a separate rounded add) when
// there is a bias. A partial sum may go through y between blocks of k: storing and reloading a
// float32 is exact. So the paths give the same bits, and a row's result never depends on the
// rows around it, the tile it lands in or the thread that runs it.
#pragma once

#include <cstdint>

#include "gpu/cpu/packed_matrix.hpp"

namespace brigade::gpu::cpu {

/// One matmul's operands: y = x * W^T (+ bias), as gemm() takes them.
struct gemm_operands {
  const float* x = nullptr;  ///< [m, w->cols()], rows ldx floats apart.
  int ldx = 0;
  const packed_matrix* w = nullptr;
  const float* bias = nullptr;  ///< [w->rows()], or null.
  float* y = nullptr;           ///< [m, w->rows()], rows ldy floats apart.
  int ldy = 0;
  /// For an int8 matrix (packed_matrix::pack_int8): x's rows quantized by gemm(), each
  /// w->k_groups() x 4 bytes, ldq apart: round(x[r][k] / x_scale[r]) + 128, the padding 128.
  const uint8_t* xq = nullptr;
  int ldq = 0;
  const float* x_scale = nullptr;
};

/// Rows [row_begin, row_end) of y, in the columns of panels [panel_begin, panel_end).
using gemm_block_fn = void (*)(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                               int panel_end);

/// AVX2 and FMA: tiles of 3 to 6 rows by one 16-column panel, or of 1 or 2 rows by 4 or 2 panels;
/// two ymm accumulators per row and panel.
void gemm_block_avx2(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                     int panel_end);

/// AVX-512F: up to 6 rows by 4 panels per tile, one zmm accumulator per row and panel. Only
/// call it where kernel_path_available(kernel_path::avx512).
void gemm_block_avx512(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                       int panel_end);

/// AVX512-BF16: bf16 weights by vdpbf16ps, activations rounded to bf16, the chain documented in
/// gemm_avx512_bf16.cpp (another numerics class: not the contract above); f32 and f16 weights as
/// gemm_block_avx512. Only call it where kernel_path_available(kernel_path::avx512_bf16).
void gemm_block_avx512_bf16(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                            int panel_end);

/// The same chain for bf16 weights continued from k_begin (even): y already holds the sum of
/// the pairs before it, as the kernel itself leaves it between blocks of k. The AMX kernel
/// hands it the k that do not fill a tile. Only call it where avx512_bf16 is available.
void gemm_block_avx512_bf16_from(const gemm_operands& op, int row_begin, int row_end,
                                 int panel_begin, int panel_end, int k_begin);

/// A row of k floats (k a multiple of 32) as k / 2 bf16 pairs, the odd k in the low half (the
/// half tdpbf16ps adds first): word p = bf16(x[2p + 1]) | bf16(x[2p]) << 16, rounded as the
/// avx512_bf16 kernel rounds. Only call it where avx512_bf16 is available.
void gemm_bf16_pairs_odd_low(const float* x, int k, uint32_t* out);

/// AMX: bf16 weights by tdpbf16ps on 16 x 16 tiles (gemm_amx_bf16.cpp), the same chain of pair
/// products as gemm_block_avx512_bf16 and so the same bits (the bf16_dot class); f32 and f16
/// weights as gemm_block_avx512. Only call it where kernel_path_available(kernel_path::amx_bf16).
void gemm_block_amx_bf16(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                         int panel_end);

/// int8 weights against rows quantized as gemm_operands::xq says: y[r][n] =
/// float(sum_k xq[r][k] W[n][k] - 128 sums[n]) * (x_scale[r] * scales[n]) (+ bias[n]). The sum is
/// exact in int32, so every int8 kernel gives the same bits. Portable C++ (gemm_int8.cpp).
void gemm_block_int8(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                     int panel_end);

/// The same with AVX512-VNNI dot products (vpdpbusd, 64 multiply-adds an instruction). Only call
/// it where int8_vnni_available().
void gemm_block_int8_vnni(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                          int panel_end);

/// Whether this CPU (and the OS's saved state) runs gemm_block_int8_vnni.
bool int8_vnni_available();

}  // namespace brigade::gpu::cpu

// The int8 matmul for quantized weights (packed_matrix::pack_int8): the portable kernel, and where
// the CPU has AVX512-VNNI, the check that gemm() may use gemm_int8_vnni.cpp's. Both compute the
// int32 sum exactly and scale it with the same two float multiplications, so they give the same
// bits (tests/gpu/gemm_int8_test.cpp).
#include <algorithm>
#include <cstdint>

#include "gpu/cpu/gemm_kernels.hpp"

namespace brigade::gpu::cpu {

void gemm_block_int8(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                     int panel_end) {
  const packed_matrix& w = *op.w;
  const int groups = w.k_groups();
  for (int r = row_begin; r < row_end; ++r) {
    const uint8_t* x = op.xq + static_cast<size_t>(r) * static_cast<size_t>(op.ldq);
    for (int p = panel_begin; p < panel_end; ++p) {
      const int8_t* panel = w.int8_panel(p);
      int32_t sums[panel_width] = {};
      for (int g = 0; g < groups; ++g) {
        const int8_t* weights = panel + static_cast<size_t>(g) * 64;
        for (int lane = 0; lane < panel_width; ++lane) {
          int32_t s = 0;
          for (int e = 0; e < 4; ++e)
            s += static_cast<int32_t>(x[g * 4 + e]) * weights[lane * 4 + e];
          sums[lane] += s;
        }
      }
      const int lanes = std::min(panel_width, w.rows() - p * panel_width);
      for (int lane = 0; lane < lanes; ++lane) {
        const int n = p * panel_width + lane;
        const int32_t exact = sums[lane] - 128 * w.row_sums()[n];
        float v = static_cast<float>(exact) * (op.x_scale[r] * w.row_scales()[n]);
        if (op.bias != nullptr) v += op.bias[n];
        op.y[static_cast<size_t>(r) * static_cast<size_t>(op.ldy) + static_cast<size_t>(n)] = v;
      }
    }
  }
}

bool int8_vnni_available() {
  static const bool available = __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vnni");
  return available;
}

}  // namespace brigade::gpu::cpu

// The bf16_dot numerics class computed one scalar operation at a time: the chain that
// gemm_avx512_bf16.cpp documents and amx_block.hpp keeps, the reference both paths are held to.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gemm_problem.hpp"

namespace brigade::testing {

inline uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

inline float from_bits(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// Denormals to a zero of the same sign: the instructions' DAZ on inputs and FTZ on results.
inline float flush(float v) {
  return (bits_of(v) & 0x7f800000u) == 0 ? from_bits(bits_of(v) & 0x80000000u) : v;
}

// vcvtneps2bf16: denormal inputs as zero, then round to nearest even.
inline float to_bf16(float v) {
  return gpu::bf16_to_f32(f32_to_bf16(flush(v)));
}

// Per pair of k from +0, the odd product's add then the even one's, each rounded and flushed; a
// missing odd partner is +0; the bias added last.
inline std::vector<float> pair_chain(const problem& p) {
  std::vector<float> w(static_cast<size_t>(p.n) * p.k);
  for (int j = 0; j < p.n; ++j)
    p.w->read_row(j, w.data() + static_cast<size_t>(j) * p.k);
  std::vector<float> y(static_cast<size_t>(p.m) * p.ldy, std::nanf(""));
  for (int r = 0; r < p.m; ++r) {
    const float* x = p.x.data() + static_cast<size_t>(r) * p.ldx;
    for (int j = 0; j < p.n; ++j) {
      const float* wj = w.data() + static_cast<size_t>(j) * p.k;
      float acc = 0.0f;
      for (int k = 0; k < p.k; k += 2) {
        const float odd = k + 1 < p.k ? flush(to_bf16(x[k + 1]) * flush(wj[k + 1])) : 0.0f;
        acc = flush(acc + odd);
        acc = flush(acc + flush(to_bf16(x[k]) * flush(wj[k])));
      }
      if (!p.bias.empty()) acc = acc + p.bias[static_cast<size_t>(j)];
      y[static_cast<size_t>(r) * p.ldy + j] = acc;
    }
  }
  return y;
}

}  // namespace brigade::testing

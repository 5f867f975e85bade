// Random matmul problems for the CPU kernel tests: rows 1..64, odd widths past one panel group
// and one block of k, padded row strides, f32/bf16/f16 weights, zeros and subnormals mixed in.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "gpu/cpu/kernel_path.hpp"
#include "gpu/cpu/packed_matrix.hpp"
#include "gpu/dtype.hpp"

namespace brigade::testing {

using gpu::dtype;
using gpu::dtype_name;
using gpu::f32_to_bf16;
using gpu::f32_to_f16;
using gpu::host_matrix;

// One random matmul: x [m, k] with row stride ldx, W [n, k], y [m, n] with row stride ldy.
struct problem {
  dtype type = dtype::f32;
  int m = 1, n = 1, k = 1, ldx = 1, ldy = 1;
  std::vector<float> x, bias;
  std::unique_ptr<gpu::cpu::packed_matrix> w;

  std::string describe() const {
    return std::string(dtype_name(type)) + " m " + std::to_string(m) + " n " + std::to_string(n) +
           " k " + std::to_string(k) + " ldx " + std::to_string(ldx) + " ldy " +
           std::to_string(ldy) + (bias.empty() ? "" : " bias");
  }
};

// Mostly normal values, with exact zeros and subnormals mixed in: every path must treat those
// the same way too.
inline float random_value(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int kind = std::uniform_int_distribution<int>(0, 49)(rng);
  if (kind == 0) return 0.0f;
  if (kind == 1) return normal(rng) * 1e-39f;
  return normal(rng);
}

inline int odd_in(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng) | 1;
}

// A problem of the given shape: values as random_value draws them, row strides padded by
// ldx_pad and ldy_pad.
inline problem make_problem(std::mt19937& rng, dtype type, int m, int n, int k, int ldx_pad,
                            int ldy_pad, bool bias) {
  problem p;
  p.type = type;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldx = p.k + ldx_pad;
  p.ldy = p.n + ldy_pad;
  std::vector<unsigned char> bytes(static_cast<size_t>(p.n) * p.k * dtype_size(p.type));
  for (size_t i = 0; i < static_cast<size_t>(p.n) * p.k; ++i) {
    const float v = random_value(rng);
    if (p.type == dtype::f32) {
      std::memcpy(&bytes[4 * i], &v, 4);
    } else {
      const uint16_t h = p.type == dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  p.w = gpu::cpu::packed_matrix::pack({host_matrix{bytes.data(), p.type, p.n, p.k}});
  p.x.resize(static_cast<size_t>(p.m) * p.ldx);
  for (auto& v : p.x)
    v = random_value(rng);
  if (bias) {
    p.bias.resize(static_cast<size_t>(p.n));
    for (auto& v : p.bias)
      v = random_value(rng);
  }
  return p;
}

// Rows 1..64; odd column counts n and k, past one panel group and (for k) one block of 256.
inline problem random_problem(std::mt19937& rng) {
  const dtype type = std::vector<dtype>{dtype::f32, dtype::bf16, dtype::f16}[rng() % 3];
  const int m = std::uniform_int_distribution<int>(1, 64)(rng);
  const int n = odd_in(rng, 1, 161);
  const int k = odd_in(rng, 1, 601);
  const int ldx_pad = static_cast<int>(rng() % 3);
  const int ldy_pad = static_cast<int>(rng() % 3);
  return make_problem(rng, type, m, n, k, ldx_pad, ldy_pad, rng() % 2 != 0);
}

// y for rows [first, first + rows) of p.x, on `path`; padding between rows stays NaN.
inline std::vector<float> run(const problem& p, int first, int rows, gpu::cpu::kernel_path path,
                              thread_pool& pool) {
  std::vector<float> y(static_cast<size_t>(rows) * p.ldy, std::nanf(""));
  gpu::cpu::gemm(p.x.data() + static_cast<size_t>(first) * p.ldx, p.ldx, rows, *p.w,
                 p.bias.empty() ? nullptr : p.bias.data(), y.data(), p.ldy, pool, path);
  return y;
}

inline bool same_row(const std::vector<float>& a, int ra, const std::vector<float>& b, int rb,
                     const problem& p) {
  return std::memcmp(a.data() + static_cast<size_t>(ra) * p.ldy,
                     b.data() + static_cast<size_t>(rb) * p.ldy, sizeof(float) * p.n) == 0;
}

}  // namespace brigade::testing

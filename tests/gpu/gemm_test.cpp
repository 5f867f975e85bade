// The CPU matmul against a double-precision reference on every kernel path (batch invariance and
// agreement between paths: kernel_path_test.cpp).
#include "gpu/cpu/gemm.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "common/thread_pool.hpp"

using namespace brigade;
using namespace brigade::gpu;

namespace {

struct weights {
  std::vector<unsigned char> bytes;
  std::vector<double> values;  // the exact values the kernel sees
};

weights random_weights(dtype type, int rows, int cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  weights w;
  w.bytes.resize(static_cast<size_t>(rows) * cols * dtype_size(type));
  w.values.resize(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < w.values.size(); ++i) {
    const float v = normal(rng);
    if (type == dtype::f32) {
      std::memcpy(&w.bytes[4 * i], &v, 4);
      w.values[i] = v;
    } else {
      const uint16_t h = type == dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(&w.bytes[2 * i], &h, 2);
      w.values[i] = type == dtype::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return w;
}

// Every dtype on every kernel path this machine has.
std::vector<std::pair<dtype, cpu::kernel_path>> dtypes_and_paths() {
  std::vector<std::pair<dtype, cpu::kernel_path>> all;
  for (cpu::kernel_path path : cpu::available_kernel_paths()) {
    for (dtype type : {dtype::f32, dtype::bf16, dtype::f16})
      all.emplace_back(type, path);
  }
  return all;
}

}  // namespace

TEST_CASE("gemm matches a double-precision reference for every dtype, shape and path", "[gemm]") {
  thread_pool pool(2);
  const uint32_t seed = 1234;
  std::mt19937 rng(seed);
  for (auto [type, path] : dtypes_and_paths()) {
    for (auto [m, n, k] : {std::tuple{1, 1, 1}, {5, 17, 9}, {13, 48, 64}, {7, 33, 130}}) {
      INFO("path " << cpu::kernel_path_name(path) << " dtype " << dtype_name(type) << " m " << m
                   << " n " << n << " k " << k << " seed " << seed);
      const weights w = random_weights(type, n, k, rng);
      auto packed = cpu::packed_matrix::pack({host_matrix{w.bytes.data(), type, n, k}});
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(m) * k), bias(static_cast<size_t>(n));
      for (auto& v : x)
        v = normal(rng);
      for (auto& v : bias)
        v = normal(rng);
      std::vector<float> y(static_cast<size_t>(m) * n);
      cpu::gemm(x.data(), k, m, *packed, bias.data(), y.data(), n, pool, path);
      // The bf16-dot path multiplies bf16 weights by activations rounded to bf16 (its numerics
      // class); the sum that follows is held to the same bound as every other path's.
      const bool rounds_x =
          cpu::numerics_of(path) == cpu::kernel_numerics::bf16_dot && type == dtype::bf16;
      auto activation = [&](float v) { return rounds_x ? bf16_to_f32(f32_to_bf16(v)) : v; };
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double ref = bias[static_cast<size_t>(j)];
          for (int kk = 0; kk < k; ++kk) {
            ref += static_cast<double>(activation(x[static_cast<size_t>(i) * k + kk])) *
                   w.values[static_cast<size_t>(j) * k + kk];
          }
          CHECK(std::abs(y[static_cast<size_t>(i) * n + j] - ref) <= 1e-4 * (1 + std::abs(ref)));
        }
      }
    }
  }
}

TEST_CASE("half-precision conversions are exact", "[dtype]") {
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0xc000) == -2.0f);
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(std::isinf(f16_to_f32(0x7c00)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    INFO("half " << h);
    REQUIRE(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))) == h);
  }
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
}

TEST_CASE("a packed matrix reads back as the bytes it was packed from", "[gemm]") {
  const uint32_t seed = 99;
  std::mt19937 rng(seed);
  auto dev = make_cpu_backend();
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (auto [rows, cols] : {std::pair{1, 1}, {17, 9}, {64, 33}, {130, 16}, {20, 150}}) {
      INFO("dtype " << dtype_name(type) << " rows " << rows << " cols " << cols << " seed "
                    << seed);
      // Two stacked parts, as gate and up are: the copy is the rows of both in order.
      const weights a = random_weights(type, rows, cols, rng);
      const weights b = random_weights(type, 3, cols, rng);
      auto m = dev->make_stacked_matrix({host_matrix{a.bytes.data(), type, rows, cols},
                                         host_matrix{b.bytes.data(), type, 3, cols}});
      std::vector<unsigned char> back(static_cast<size_t>(rows + 3) * cols * dtype_size(type));
      dev->read_matrix(*m, back.data());
      std::vector<unsigned char> expected = a.bytes;
      expected.insert(expected.end(), b.bytes.begin(), b.bytes.end());
      CHECK(back == expected);
    }
  }
}

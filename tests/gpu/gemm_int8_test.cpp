// The int8 matmul a draft model runs on (packed_matrix::pack_int8, gpu/cpu/gemm_int8*.cpp): every
// output is the documented integer sum scaled by two float multiplications, the same bits on every
// kernel, thread count and batch; close to the exact product; and an int8 matrix reads back its
// dequantized rows and refuses to unpack.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/backend.hpp"
#include "gpu/cpu/gemm.hpp"
#include "gpu/cpu/gemm_kernels.hpp"
#include "gpu/cpu/packed_matrix.hpp"

using namespace brigade;
using namespace brigade::gpu;

namespace {

// The quantization the header documents: scale = largest magnitude / 127, q = round to nearest
// of value * 127 / largest, within [-127, 127].
struct quantized {
  std::vector<int> q;
  float scale = 0.0f;
};

quantized quantize(const float* v, int k) {
  quantized out;
  float largest = 0.0f;
  for (int i = 0; i < k; ++i)
    largest = std::max(largest, std::fabs(v[i]));
  out.scale = largest / 127.0f;
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  for (int i = 0; i < k; ++i)
    out.q.push_back(std::clamp(static_cast<int>(std::nearbyint(v[i] * inverse)), -127, 127));
  return out;
}

struct int8_problem {
  int m = 1, n = 1, k = 1, ldx = 1, ldy = 1;
  std::vector<float> x, w, bias;
  std::unique_ptr<cpu::packed_matrix> packed;
};

int8_problem make(std::mt19937& rng, int m, int n, int k, bool bias) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int8_problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldx = k + 3;
  p.ldy = n + 5;
  p.x.resize(static_cast<size_t>(m) * p.ldx);
  for (auto& v : p.x)
    v = normal(rng);
  // A row of zeros: its scale is 0 and its outputs the bias alone.
  if (m > 2) std::fill(p.x.begin() + p.ldx, p.x.begin() + 2 * p.ldx, 0.0f);
  p.w.resize(static_cast<size_t>(n) * k);
  for (auto& v : p.w)
    v = 0.05f * normal(rng);
  if (bias) {
    for (int i = 0; i < n; ++i)
      p.bias.push_back(normal(rng));
  }
  p.packed = cpu::packed_matrix::pack_int8({host_matrix{p.w.data(), dtype::f32, n, k}});
  return p;
}

// Output (r, c) as the header defines it, computed one scalar operation at a time.
float reference(const int8_problem& p, int r, int c) {
  const quantized x = quantize(p.x.data() + static_cast<size_t>(r) * p.ldx, p.k);
  const quantized w = quantize(p.w.data() + static_cast<size_t>(c) * p.k, p.k);
  int32_t sum = 0;
  for (int i = 0; i < p.k; ++i)
    sum += x.q[static_cast<size_t>(i)] * w.q[static_cast<size_t>(i)];
  float v = static_cast<float>(sum) * (x.scale * w.scale);
  if (!p.bias.empty()) v += p.bias[static_cast<size_t>(c)];
  return v;
}

std::vector<float> run(const int8_problem& p, thread_pool& pool) {
  std::vector<float> y(static_cast<size_t>(p.m) * p.ldy, -7.0f);
  cpu::gemm(p.x.data(), p.ldx, p.m, *p.packed, p.bias.empty() ? nullptr : p.bias.data(), y.data(),
            p.ldy, pool, cpu::kernel_path::avx2);
  return y;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

TEST_CASE("the int8 matmul gives the documented sum's bits on every thread count and batch",
          "[gemm][int8]") {
  std::mt19937 rng(5);
  thread_pool one(1), three(3);
  for (int trial = 0; trial < 40; ++trial) {
    const int m = std::uniform_int_distribution<int>(1, 40)(rng);
    const int n = std::uniform_int_distribution<int>(1, 90)(rng);
    const int k = std::uniform_int_distribution<int>(1, 300)(rng);
    const int8_problem p = make(rng, m, n, k, trial % 2 == 0);
    INFO("m " << m << " n " << n << " k " << k);
    const auto alone = run(p, one);
    const auto shared = run(p, three);
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < p.ldy; ++c) {
        const size_t i = static_cast<size_t>(r) * p.ldy + c;
        if (c >= n) {  // past the row: untouched
          REQUIRE(alone[i] == -7.0f);
          continue;
        }
        const float want = reference(p, r, c);
        INFO("row " << r << " column " << c);
        REQUIRE(same_bits(alone[i], want));
        REQUIRE(same_bits(shared[i], want));
      }
    }
  }
}

TEST_CASE("the portable and the VNNI int8 kernels give the same bits", "[gemm][int8]") {
  if (!cpu::int8_vnni_available()) {
    WARN("this CPU has no AVX512-VNNI: only the portable int8 kernel runs here");
    return;
  }
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    const int m = std::uniform_int_distribution<int>(1, 13)(rng);
    const int n = std::uniform_int_distribution<int>(1, 70)(rng);
    const int k = std::uniform_int_distribution<int>(1, 200)(rng);
    const int8_problem p = make(rng, m, n, k, trial % 3 == 0);
    // The rows quantized as gemm() does, through the reference's rule.
    const int groups = p.packed->k_groups();
    std::vector<uint8_t> xq(static_cast<size_t>(m) * groups * 4, 128);
    std::vector<float> scales(static_cast<size_t>(m));
    for (int r = 0; r < m; ++r) {
      const quantized q = quantize(p.x.data() + static_cast<size_t>(r) * p.ldx, k);
      scales[static_cast<size_t>(r)] = q.scale;
      for (int i = 0; i < k; ++i)
        xq[static_cast<size_t>(r) * groups * 4 + i] =
            static_cast<uint8_t>(q.q[static_cast<size_t>(i)] + 128);
    }
    std::vector<float> a(static_cast<size_t>(m) * p.ldy, 0.0f), b = a;
    cpu::gemm_operands op{p.x.data(),     p.ldx,
                          p.packed.get(), p.bias.empty() ? nullptr : p.bias.data(),
                          a.data(),       p.ldy};
    op.xq = xq.data();
    op.ldq = groups * 4;
    op.x_scale = scales.data();
    cpu::gemm_block_int8(op, 0, m, 0, p.packed->panels());
    op.y = b.data();
    cpu::gemm_block_int8_vnni(op, 0, m, 0, p.packed->panels());
    INFO("m " << m << " n " << n << " k " << k);
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    // In four blocks, as work items split a product: tiles start at any row and panel.
    std::vector<float> c(a.size(), 0.0f);
    op.y = c.data();
    const int rows_split = m / 2, panels_split = (p.packed->panels() + 1) / 2;
    for (const auto& [r0, r1] : {std::pair{0, rows_split}, std::pair{rows_split, m}}) {
      cpu::gemm_block_int8_vnni(op, r0, r1, 0, panels_split);
      cpu::gemm_block_int8_vnni(op, r0, r1, panels_split, p.packed->panels());
    }
    REQUIRE(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the int8 matmul stays close to the exact product", "[gemm][int8]") {
  std::mt19937 rng(13);
  thread_pool pool(2);
  const int8_problem p = make(rng, 4, 256, 128, false);
  const auto y = run(p, pool);
  double worst = 0.0, largest = 0.0;
  for (int r = 0; r < p.m; ++r) {
    if (r == 1) continue;  // the row of zeros
    for (int c = 0; c < p.n; ++c) {
      double exact = 0.0;
      for (int i = 0; i < p.k; ++i)
        exact += static_cast<double>(p.x[static_cast<size_t>(r) * p.ldx + i]) *
                 p.w[static_cast<size_t>(c) * p.k + i];
      worst = std::max(worst, std::fabs(exact - y[static_cast<size_t>(r) * p.ldy + c]));
      largest = std::max(largest, std::fabs(exact));
    }
  }
  INFO("worst error " << worst << " of outputs up to " << largest);
  CHECK(worst > 0.0);  // it is an approximation
  CHECK(worst < 0.03 * largest);
}

TEST_CASE("an int8 matrix reads back its dequantized rows and refuses to unpack", "[gemm][int8]") {
  const std::vector<float> w = {1.0f, -0.5f, 0.25f, 0.0f, 2.0f, 0.0f, 0.0f, 0.0f, -3.0f, 1.5f};
  auto m = cpu::packed_matrix::pack_int8({host_matrix{w.data(), dtype::f32, 2, 5}});
  CHECK(m->int8());
  CHECK(m->rows() == 2);
  CHECK(m->cols() == 5);
  std::vector<float> row(5);
  m->read_row(0, row.data());
  // Row 0: largest 2, so 1 -> 63.5 rounds to 64 (ties to even), -0.5 -> -31.75 -> -32, ...
  const float s0 = 2.0f / 127.0f;
  CHECK(row[0] == 64 * s0);
  CHECK(row[1] == -32 * s0);
  CHECK(row[4] == 127 * s0);
  m->read_row(1, row.data());
  CHECK(row[3] == -127 * (3.0f / 127.0f));
  std::vector<float> out(10);
  CHECK_THROWS_AS(m->unpack(out.data()), std::logic_error);
  // The backend holding a draft's weights this way exists exactly where the CPU has VNNI.
  CHECK((make_int8_cpu_backend(nullptr) != nullptr) == cpu::int8_vnni_available());
}

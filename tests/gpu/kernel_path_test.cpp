// The CPU kernel paths (gpu/cpu/kernel_path.hpp): every path this machine has computes the one
// documented FMA chain per output, so all give the same bits, on the matmul alone and through the
// whole engine; every path is batch invariant; and a process runs the path it asked for or refuses
// to start.
#include "gpu/cpu/kernel_path.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "common/thread_pool.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "gpu/cpu/gemm.hpp"
#include "model/engine.hpp"
#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::gpu;
using cpu::kernel_path;

namespace {

// One random matmul: x [m, k] with row stride ldx, W [n, k], y [m, n] with row stride ldy.
struct problem {
  dtype type = dtype::f32;
  int m = 1, n = 1, k = 1, ldx = 1, ldy = 1;
  std::vector<float> x, bias;
  std::unique_ptr<cpu::packed_matrix> w;

  std::string describe() const {
    return std::string(dtype_name(type)) + " m " + std::to_string(m) + " n " + std::to_string(n) +
           " k " + std::to_string(k) + " ldx " + std::to_string(ldx) + " ldy " +
           std::to_string(ldy) + (bias.empty() ? "" : " bias");
  }
};

// Mostly normal values, with exact zeros and subnormals mixed in: every path must treat those
// the same way too.
float random_value(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int kind = std::uniform_int_distribution<int>(0, 49)(rng);
  if (kind == 0) return 0.0f;
  if (kind == 1) return normal(rng) * 1e-39f;
  return normal(rng);
}

int odd_in(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng) | 1;
}

// Rows 1..64; odd column counts n and k, past one panel group and (for k) one block of 256.
problem random_problem(std::mt19937& rng) {
  problem p;
  p.type = std::vector<dtype>{dtype::f32, dtype::bf16, dtype::f16}[rng() % 3];
  p.m = std::uniform_int_distribution<int>(1, 64)(rng);
  p.n = odd_in(rng, 1, 161);
  p.k = odd_in(rng, 1, 601);
  p.ldx = p.k + static_cast<int>(rng() % 3);
  p.ldy = p.n + static_cast<int>(rng() % 3);
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
  p.w = cpu::packed_matrix::pack({host_matrix{bytes.data(), p.type, p.n, p.k}});
  p.x.resize(static_cast<size_t>(p.m) * p.ldx);
  for (auto& v : p.x)
    v = random_value(rng);
  if (rng() % 2) {
    p.bias.resize(static_cast<size_t>(p.n));
    for (auto& v : p.bias)
      v = random_value(rng);
  }
  return p;
}

// y for rows [first, first + rows) of p.x, on `path`; padding between rows stays NaN.
std::vector<float> run(const problem& p, int first, int rows, kernel_path path, thread_pool& pool) {
  std::vector<float> y(static_cast<size_t>(rows) * p.ldy, std::nanf(""));
  cpu::gemm(p.x.data() + static_cast<size_t>(first) * p.ldx, p.ldx, rows, *p.w,
            p.bias.empty() ? nullptr : p.bias.data(), y.data(), p.ldy, pool, path);
  return y;
}

// The contract of gemm_kernels.hpp, one scalar operation at a time: a fused multiply-add chain
// over k in order from +0, then the bias as a separate add.
std::vector<float> fma_chain(const problem& p) {
  std::vector<float> w(static_cast<size_t>(p.n) * p.k);
  for (int j = 0; j < p.n; ++j)
    p.w->read_row(j, w.data() + static_cast<size_t>(j) * p.k);
  std::vector<float> y(static_cast<size_t>(p.m) * p.ldy, std::nanf(""));
  for (int r = 0; r < p.m; ++r) {
    for (int j = 0; j < p.n; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < p.k; ++k)
        acc = std::fma(p.x[static_cast<size_t>(r) * p.ldx + k], w[static_cast<size_t>(j) * p.k + k],
                       acc);
      if (!p.bias.empty()) acc = acc + p.bias[static_cast<size_t>(j)];
      y[static_cast<size_t>(r) * p.ldy + j] = acc;
    }
  }
  return y;
}

bool same_row(const std::vector<float>& a, int ra, const std::vector<float>& b, int rb,
              const problem& p) {
  return std::memcmp(a.data() + static_cast<size_t>(ra) * p.ldy,
                     b.data() + static_cast<size_t>(rb) * p.ldy, sizeof(float) * p.n) == 0;
}

}  // namespace

TEST_CASE("every kernel path computes each output as the one documented FMA chain",
          "[kernel_path]") {
  thread_pool pool(2);
  const uint32_t seed = 2028;
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 150; ++trial) {
    const problem p = random_problem(rng);
    const std::vector<float> reference = fma_chain(p);
    for (kernel_path path : cpu::available_kernel_paths()) {
      INFO("seed " << seed << " trial " << trial << " path " << cpu::kernel_path_name(path) << " "
                   << p.describe());
      const std::vector<float> y = run(p, 0, p.m, path, pool);
      for (int r = 0; r < p.m; ++r) {
        INFO("row " << r);
        REQUIRE(same_row(y, r, reference, r, p));
      }
    }
  }
}

TEST_CASE("on every kernel path a row's result never depends on its batch or thread count",
          "[kernel_path]") {
  thread_pool two(2), one(1);
  const uint32_t seed = 77;
  std::mt19937 rng(seed);
  for (kernel_path path : cpu::available_kernel_paths()) {
    for (int trial = 0; trial < 40; ++trial) {
      const problem p = random_problem(rng);
      INFO("seed " << seed << " trial " << trial << " path " << cpu::kernel_path_name(path) << " "
                   << p.describe());
      const std::vector<float> batch = run(p, 0, p.m, path, two);
      const std::vector<float> single_thread = run(p, 0, p.m, path, one);
      REQUIRE(std::memcmp(single_thread.data(), batch.data(), sizeof(float) * batch.size()) == 0);
      // The row alone, and inside a smaller batch that starts at a random row before it.
      const int r = std::uniform_int_distribution<int>(0, p.m - 1)(rng);
      const int first = std::uniform_int_distribution<int>(0, r)(rng);
      INFO("row " << r << " sub-batch from " << first);
      CHECK(same_row(run(p, r, 1, path, two), 0, batch, r, p));
      CHECK(same_row(run(p, first, p.m - first, path, two), r - first, batch, r, p));
    }
  }
}

TEST_CASE("the engine generates the same tokens and logits on every kernel path", "[kernel_path]") {
  for (const char* family : {"qwen3_moe", "deepseek_v3"}) {
    INFO("family " << family);
    testing::temp_dir dir("kernel-paths");
    model::model_spec spec = testing::small_model_spec(31, family);
    // Widths that are not multiples of the 16-column panel, so tails run on every path.
    spec.hidden = 72;
    spec.moe_inter = 40;
    spec.vocab = 500;
    REQUIRE(model::write_random_model(spec, dir.path()).ok());
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> tokens;
    for (kernel_path path : cpu::available_kernel_paths()) {
      auto dev = cpu::make_backend(nullptr, path);
      auto m = model::loaded_model::load(dir.path(), *dev, true);
      REQUIRE(m.ok());
      model::engine eng(*m.value(), *dev, model::engine_options{});
      model::request_options req;
      req.max_tokens = 12;
      req.keep_logits = true;
      std::vector<int64_t> ids;
      for (int seq = 0; seq < 3; ++seq) {
        std::vector<int32_t> prompt;
        for (int i = 0; i < 5 + 9 * seq; ++i)
          prompt.push_back((seq * 131 + i * 17) % spec.vocab);
        ids.push_back(eng.submit(prompt, req).value());
      }
      eng.run_until_idle();
      for (int64_t id : ids) {
        tokens.push_back(eng.output(id));
        logits.push_back(eng.kept_logits(id));
      }
    }
    const size_t per_path = 3;
    for (size_t i = per_path; i < logits.size(); ++i) {
      INFO("path " << i / per_path << " sequence " << i % per_path);
      CHECK(tokens[i] == tokens[i % per_path]);
      REQUIRE(logits[i].size() == logits[i % per_path].size());
      CHECK(std::memcmp(logits[i].data(), logits[i % per_path].data(),
                        sizeof(float) * logits[i].size()) == 0);
    }
  }
}

TEST_CASE("a kernel path is chosen by name, and one this CPU lacks is refused", "[kernel_path]") {
  REQUIRE(cpu::kernel_path_available(kernel_path::avx2));
  CHECK(cpu::available_kernel_paths().front() == kernel_path::avx2);
  CHECK(cpu::choose_kernel_path("auto").value() == cpu::best_kernel_path());
  CHECK(cpu::choose_kernel_path("avx2").value() == kernel_path::avx2);
  const result<kernel_path> avx512 = cpu::choose_kernel_path("avx512");
  CHECK(avx512.ok() == cpu::kernel_path_available(kernel_path::avx512));
  if (avx512.ok()) {
    CHECK(cpu::best_kernel_path() == kernel_path::avx512);
  } else {
    CHECK(avx512.err().code == errc::unsupported);
    CHECK_THAT(avx512.err().message, Catch::Contains("available: avx2"));
    CHECK_THROWS_WITH(cpu::make_backend(nullptr, kernel_path::avx512), Catch::Contains("lacks"));
  }
  const result<kernel_path> unknown = cpu::choose_kernel_path("avx9000");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.err().code == errc::invalid_argument);
  CHECK_THAT(unknown.err().message, Catch::Contains("avx9000"));
}

// ctest runs this case again with BRIGADE_CPU_KERNELS set to avx2, avx512 and a bad name (see
// CMakeLists.txt): the process takes the path named, or refuses one it cannot run.
TEST_CASE("the process runs the kernel path BRIGADE_CPU_KERNELS names", "[kernel_path_env]") {
  const char* env = std::getenv("BRIGADE_CPU_KERNELS");
  INFO("BRIGADE_CPU_KERNELS=" << (env ? env : "(unset)"));
  const result<kernel_path> expected = cpu::choose_kernel_path(env && *env ? env : "auto");
  if (expected.ok()) {
    CHECK(cpu::process_kernel_path() == expected.value());
    CHECK(make_cpu_backend() != nullptr);
  } else {
    CHECK_THROWS_WITH(cpu::process_kernel_path(), Catch::Contains(expected.err().message));
    CHECK_THROWS_WITH(make_cpu_backend(), Catch::Contains("BRIGADE_CPU_KERNELS"));
  }
}

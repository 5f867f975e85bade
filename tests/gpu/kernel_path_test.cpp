// The CPU kernel paths (gpu/cpu/kernel_path.hpp): every exact path this machine has computes the
// one documented FMA chain per output, so all give the same bits, on the matmul alone and through
// the whole engine; every path, bf16-dot included, is batch invariant; and a process runs the path
// it asked for or refuses to start. The bf16-dot path's own chain: kernel_bf16_dot_test.cpp.
#include "gpu/cpu/kernel_path.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include "gemm_problem.hpp"

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
using testing::problem;
using testing::random_problem;
using testing::run;
using testing::same_row;

namespace {

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

}  // namespace

TEST_CASE("every exact kernel path computes each output as the one documented FMA chain",
          "[kernel_path]") {
  thread_pool pool(2);
  const uint32_t seed = 2028;
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 150; ++trial) {
    const problem p = random_problem(rng);
    const std::vector<float> reference = fma_chain(p);
    for (kernel_path path : cpu::available_kernel_paths()) {
      // The bf16-dot path keeps this chain for f32 and f16 weights; bf16 weights are its own.
      if (cpu::numerics_of(path) != cpu::kernel_numerics::f32 && p.type == dtype::bf16) continue;
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

TEST_CASE("grouped products give each product's own bits and write nothing else", "[kernel_path]") {
  thread_pool two(2), one(1);
  const uint32_t seed = 4040;
  std::mt19937 rng(seed);
  for (kernel_path path : cpu::available_kernel_paths()) {
    for (int trial = 0; trial < 20; ++trial) {
      // 1 to 9 products of random shapes, one with no rows and one past a block of 72 rows now
      // and then (gemm.cpp's work items), as a layer's experts are.
      const int count = std::uniform_int_distribution<int>(1, 9)(rng);
      std::vector<problem> problems;
      for (int j = 0; j < count; ++j)
        problems.push_back(random_problem(rng));
      if (trial % 4 == 1)
        problems.push_back(testing::make_problem(rng, dtype::bf16, 150, 40, 70, 1, 2, false));
      std::vector<std::vector<float>> ys;
      std::vector<cpu::gemm_product> products;
      for (size_t j = 0; j < problems.size(); ++j) {
        const problem& p = problems[j];
        const int rows = trial % 3 == 2 && j == 0 ? 0 : p.m;
        ys.emplace_back(static_cast<size_t>(p.m) * p.ldy, std::nanf(""));
        products.push_back({p.x.data(), p.ldx, rows, p.w.get(),
                            p.bias.empty() ? nullptr : p.bias.data(), ys.back().data(), p.ldy});
      }
      for (thread_pool* pool : {&two, &one}) {
        for (auto& y : ys)
          std::fill(y.begin(), y.end(), std::nanf(""));
        cpu::gemm_grouped(products.data(), products.size(), *pool, path);
        for (size_t j = 0; j < problems.size(); ++j) {
          const problem& p = problems[j];
          INFO("seed " << seed << " trial " << trial << " path " << cpu::kernel_path_name(path)
                       << " threads " << pool->size() << " product " << j << " of "
                       << problems.size() << ": " << p.describe());
          std::vector<float> alone = run(p, 0, products[j].m, path, two);
          alone.resize(ys[j].size(), std::nanf(""));
          REQUIRE(std::memcmp(alone.data(), ys[j].data(), sizeof(float) * alone.size()) == 0);
        }
      }
    }
  }
}

TEST_CASE("the engine generates the same tokens and logits on every exact kernel path",
          "[kernel_path]") {
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
      if (cpu::numerics_of(path) != cpu::kernel_numerics::f32) continue;
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
  // "auto" only ever means an exact path: the bf16-dot one changes results, so it is asked for.
  CHECK(cpu::numerics_of(cpu::best_kernel_path()) == cpu::kernel_numerics::f32);
  const result<kernel_path> bf16_dot = cpu::choose_kernel_path("avx512_bf16");
  CHECK(bf16_dot.ok() == cpu::kernel_path_available(kernel_path::avx512_bf16));
  if (!bf16_dot.ok()) CHECK(bf16_dot.err().code == errc::unsupported);
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

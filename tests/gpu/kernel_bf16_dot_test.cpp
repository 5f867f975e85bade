// The bf16-dot kernel path (avx512_bf16, gpu/cpu/gemm_avx512_bf16.cpp): its own numerics class.
// Each output is the documented chain of pair products, computed here one scalar operation at a
// time; the engine on it stays within a stated bound of the exact path; and the path is only run
// when asked for. Batch invariance is checked for every path in kernel_path_test.cpp. Every case
// skips, saying why, where the CPU lacks AVX512-BF16.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "bf16_pair_chain.hpp"
#include "engine_on_path.hpp"
#include "gemm_problem.hpp"
#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::gpu;
using cpu::kernel_path;
using testing::problem;

namespace {

bool have_bf16_dot() {
  if (cpu::kernel_path_available(kernel_path::avx512_bf16)) return true;
  WARN("skipped: this CPU lacks AVX512-BF16 (the avx512_bf16 kernel path)");
  return false;
}

}  // namespace

TEST_CASE("the bf16-dot path computes each output as its documented chain of pair products",
          "[kernel_path][bf16_dot]") {
  if (!have_bf16_dot()) return;
  thread_pool pool(2);
  const uint32_t seed = 4049;
  std::mt19937 rng(seed);
  int bf16_problems = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const problem p = testing::random_problem(rng);
    if (p.type != dtype::bf16) continue;  // f32 and f16 weights: the exact chain (kernel_path_test)
    ++bf16_problems;
    INFO("seed " << seed << " trial " << trial << " " << p.describe());
    const std::vector<float> reference = testing::pair_chain(p);
    const std::vector<float> y = testing::run(p, 0, p.m, kernel_path::avx512_bf16, pool);
    for (int r = 0; r < p.m; ++r) {
      INFO("row " << r);
      REQUIRE(testing::same_row(y, r, reference, r, p));
    }
  }
  CHECK(bf16_problems > 40);
}

TEST_CASE("the engine on the bf16-dot path stays within its stated bound of the exact path",
          "[kernel_path][bf16_dot]") {
  if (!have_bf16_dot()) return;
  for (const char* family : {"qwen3_moe", "deepseek_v3"}) {
    INFO("family " << family);
    testing::temp_dir dir("bf16-dot");
    model::model_spec spec = testing::small_model_spec(32, family);
    spec.hidden = 72;
    spec.moe_inter = 40;
    spec.vocab = 500;
    REQUIRE(model::write_random_model(spec, dir.path()).ok());
    std::vector<int32_t> prompt;
    for (int i = 0; i < 20; ++i)
      prompt.push_back((i * 37 + 11) % spec.vocab);
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> out;
    for (kernel_path path : {kernel_path::avx512, kernel_path::avx512_bf16}) {
      testing::engine_run run = testing::run_engine_on_path(dir.path(), path, prompt);
      logits.push_back(std::move(run.logits));
      out.push_back(std::move(run.tokens));
    }
    REQUIRE(logits[0].size() == logits[1].size());
    // A logits row is compared while both paths chose the same tokens before it: the same context.
    size_t rows = 1;
    while (rows < out[0].size() && out[0][rows - 1] == out[1][rows - 1])
      ++rows;
    // The bound: each activation rounded to bf16 errs by at most 2^-9 of itself; through the
    // layers that stays a few percent of the logits' size. Measured worst: docs/cpu_kernels.md.
    double worst = 0.0, spread = 0.0;
    bool differs = false;
    for (size_t i = 0; i < rows * static_cast<size_t>(spec.vocab); ++i) {
      worst = std::max(worst, std::fabs(double(logits[0][i]) - logits[1][i]));
      spread = std::max(spread, std::fabs(double(logits[0][i])));
      differs = differs || logits[0][i] != logits[1][i];
    }
    INFO("rows compared " << rows << ", worst |difference| " << worst << ", largest |logit| "
                          << spread);
    CHECK(worst <= 0.05 * spread);
    // It is another numerics class: if nothing differed, the path did not run.
    CHECK(differs);
    WARN(family << ": " << rows << " rows, worst |difference| " << worst << " of largest |logit| "
                << spread);
  }
}

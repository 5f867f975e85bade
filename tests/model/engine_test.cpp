// The engine's invariants: batch invariance, chunked prefill, thread count, sampling.
#include "model/engine.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "common/thread_pool.hpp"
#include "model/kv_layout.hpp"
#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::model;

namespace {

struct fixture {
  testing::temp_dir dir{"engine"};
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<loaded_model> model;

  explicit fixture(const std::string& family = "qwen3_moe", thread_pool* pool = nullptr) {
    model_spec spec = testing::small_model_spec(11, family);
    spec.dtype = "bfloat16";
    REQUIRE(write_random_model(spec, dir.path()).ok());
    dev = gpu::make_cpu_backend(pool);
    auto m = loaded_model::load(dir.path(), *dev, true);
    REQUIRE(m.ok());
    model = std::move(m.value());
  }
};

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back((seed * 131 + i * 17) % 500);
  return p;
}

struct run_result {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

std::vector<run_result> run(fixture& f, const std::vector<std::vector<int32_t>>& prompts,
                            engine_options options, request_options request = {},
                            speculation_stats* speculation = nullptr) {
  engine eng(*f.model, *f.dev, options);
  request.keep_logits = true;
  std::vector<int64_t> ids;
  for (const auto& p : prompts) {
    auto id = eng.submit(p, request);
    REQUIRE(id.ok());
    ids.push_back(id.value());
  }
  eng.run_until_idle();
  std::vector<run_result> out;
  for (int64_t id : ids)
    out.push_back({eng.output(id), eng.kept_logits(id)});
  if (speculation) *speculation = eng.speculation();
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("a sequence's logits do not depend on its batch", "[engine]") {
  const std::string family = GENERATE(as<std::string>{}, "qwen3_moe", "deepseek_v3");
  const gpu::dtype kv = GENERATE(gpu::dtype::f32, gpu::dtype::bf16);
  INFO("family " << family << ", KV " << kv_dtype_name(kv));
  fixture f(family);
  request_options req;
  req.max_tokens = 12;
  engine_options options;
  options.kv_dtype = kv;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i)
    prompts.push_back(prompt(5 + 7 * i, i));
  const auto together = run(f, prompts, options, req);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = run(f, {prompts[i]}, options, req);
    INFO("prompt " << i);
    CHECK(alone[0].tokens == together[i].tokens);
    CHECK(same_bits(alone[0].logits, together[i].logits));
  }
}

TEST_CASE("chunked prefill gives the same bits as one-shot prefill", "[engine]") {
  const std::string family = GENERATE(as<std::string>{}, "qwen3_moe", "deepseek_v3");
  const gpu::dtype kv = GENERATE(gpu::dtype::f32, gpu::dtype::bf16);
  INFO("family " << family << ", KV " << kv_dtype_name(kv));
  fixture f(family);
  request_options req;
  req.max_tokens = 6;
  const auto p = prompt(70, 3);
  engine_options big;
  big.kv_dtype = kv;
  big.max_step_tokens = 256;
  engine_options small = big;
  small.max_step_tokens = 7;
  engine_options tiny_blocks = big;
  tiny_blocks.block_tokens = 4;
  const auto a = run(f, {p}, big, req);
  const auto b = run(f, {p}, small, req);
  const auto c = run(f, {p}, tiny_blocks, req);
  CHECK(a[0].tokens == b[0].tokens);
  CHECK(same_bits(a[0].logits, b[0].logits));
  CHECK(same_bits(a[0].logits, c[0].logits));
}

TEST_CASE("a bf16 KV cache moves the logits within its bound and halves the KV", "[engine]") {
  const std::string family = GENERATE(as<std::string>{}, "qwen3_moe", "deepseek_v3");
  INFO("family " << family);
  fixture f(family);
  request_options req;
  req.max_tokens = 8;
  const auto p = prompt(60, 5);
  engine_options f32;
  engine_options bf16;
  bf16.kv_dtype = gpu::dtype::bf16;
  const auto a = run(f, {p}, f32, req);
  const auto b = run(f, {p}, bf16, req);
  REQUIRE(a[0].logits.size() == b[0].logits.size());
  // Compare the rows both runs computed from the same tokens: the first token's, and every later
  // one while the tokens agree.
  const size_t vocab = a[0].logits.size() / a[0].tokens.size();
  float worst = 0.0f;
  for (size_t row = 0; row < a[0].tokens.size(); ++row) {
    for (size_t i = row * vocab; i < (row + 1) * vocab; ++i)
      worst = std::max(worst, std::fabs(a[0].logits[i] - b[0].logits[i]));
    if (a[0].tokens[row] != b[0].tokens[row]) break;
  }
  INFO("max |f32 - bf16| logits " << worst);
  CHECK(worst > 0.0f);
  CHECK(worst < 5e-2f);
  engine e32(*f.model, *f.dev, f32);
  engine e16(*f.model, *f.dev, bf16);
  CHECK(e16.kv_bytes() * 2 == e32.kv_bytes());
}

TEST_CASE("results do not depend on the number of threads", "[engine]") {
  thread_pool one(1), three(3);
  fixture f1("qwen2_moe", &one);
  fixture f3("qwen2_moe", &three);
  request_options req;
  req.max_tokens = 8;
  const auto p = prompt(40, 9);
  const auto a = run(f1, {p}, {}, req);
  const auto b = run(f3, {p}, {}, req);
  CHECK(a[0].tokens == b[0].tokens);
  CHECK(same_bits(a[0].logits, b[0].logits));
}

TEST_CASE("sampling is deterministic for a seed and honours the limits", "[engine][sampler]") {
  fixture f;
  request_options req;
  req.max_tokens = 16;
  req.sampling.temperature = 1.0f;
  req.sampling.seed = 42;
  const auto p = prompt(10, 1);
  const auto a = run(f, {p}, {}, req);
  const auto b = run(f, {p, prompt(30, 2)}, {}, req);
  CHECK(a[0].tokens == b[0].tokens);
  req.sampling.seed = 43;
  const auto c = run(f, {p}, {}, req);
  CHECK(a[0].tokens != c[0].tokens);
  // top_k 1 is greedy whatever the temperature.
  request_options greedy;
  greedy.max_tokens = 16;
  request_options top1 = greedy;
  top1.sampling.temperature = 2.0f;
  top1.sampling.top_k = 1;
  CHECK(run(f, {p}, {}, greedy)[0].tokens == run(f, {p}, {}, top1)[0].tokens);
}

TEST_CASE("a stop token ends generation", "[engine]") {
  fixture f;
  request_options req;
  req.max_tokens = 20;
  const auto p = prompt(8, 4);
  const auto full = run(f, {p}, {}, req);
  REQUIRE(full[0].tokens.size() == 20);
  req.stop_ids = {full[0].tokens[5]};
  engine eng(*f.model, *f.dev, {});
  auto id = eng.submit(p, req);
  REQUIRE(id.ok());
  eng.run_until_idle();
  const auto& out = eng.output(id.value());
  const auto first = std::find(full[0].tokens.begin(), full[0].tokens.end(), req.stop_ids[0]);
  CHECK(out.size() == static_cast<size_t>(first - full[0].tokens.begin()) + 1);
  CHECK(eng.finished(id.value()) == finish_reason::stop);
}

TEST_CASE("bad submissions are refused with a reason", "[engine]") {
  fixture f;
  engine eng(*f.model, *f.dev, {});
  request_options req;
  CHECK_FALSE(eng.submit({}, req).ok());
  auto out_of_vocab = eng.submit({1, 2, 9999}, req);
  REQUIRE_FALSE(out_of_vocab.ok());
  CHECK_THAT(out_of_vocab.err().message, Catch::Contains("9999"));
  req.max_tokens = 0;
  CHECK_FALSE(eng.submit({1}, req).ok());
}

namespace {

// Prompts whose generations prompt lookup can draft: a phrase said again and again, and the same
// with noise between the repeats.
std::vector<std::vector<int32_t>> repetitive_prompts() {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    const auto phrase = prompt(6 + i, 20 + i);
    std::vector<int32_t> p;
    for (int r = 0; r < 4; ++r) {
      p.insert(p.end(), phrase.begin(), phrase.end());
      if (i % 2 == 1) p.push_back(400 + r);
    }
    prompts.push_back(p);
  }
  prompts.push_back(prompt(9, 30));
  return prompts;
}

// The repetitive prompts with 40 greedy tokens each, their plain output, and engine options
// that draft up to 4 tokens.
struct speculation_fixture {
  fixture f;
  std::vector<std::vector<int32_t>> prompts = repetitive_prompts();
  request_options req = greedy_tokens(40);
  std::vector<run_result> plain = run(f, prompts, {}, req);
  engine_options spec = drafting(4);

  static request_options greedy_tokens(int n) {
    request_options r;
    r.max_tokens = n;
    return r;
  }
  static engine_options drafting(int max_draft) {
    engine_options o;
    o.speculation.max_draft = max_draft;
    return o;
  }
};

}  // namespace

TEST_CASE("speculative decoding gives plain decoding's tokens and logits",
          "[engine][speculation]") {
  fixture f;
  const auto prompts = repetitive_prompts();
  request_options greedy;
  greedy.max_tokens = 40;
  request_options sampled = greedy;
  sampled.sampling.temperature = 0.3f;
  sampled.sampling.top_k = 8;
  sampled.sampling.seed = 5;
  for (const request_options& req : {greedy, sampled}) {
    const auto plain = run(f, prompts, {}, req);
    for (int max_draft : {1, 4}) {
      for (auto [step_tokens, adaptive] : {std::pair{256, true}, {9, true}, {256, false}}) {
        engine_options spec;
        spec.speculation.max_draft = max_draft;
        spec.speculation.adaptive = adaptive;
        spec.max_step_tokens = step_tokens;
        speculation_stats stats;
        const auto drafted = run(f, prompts, spec, req, &stats);
        INFO("temperature " << req.sampling.temperature << ", max_draft " << max_draft
                            << ", step budget " << step_tokens << ", adaptive " << adaptive);
        // The comparison proves something only if drafts were both kept and thrown away.
        REQUIRE(stats.accepted_tokens > 0);
        REQUIRE(stats.drafted_tokens > stats.accepted_tokens);
        for (size_t i = 0; i < prompts.size(); ++i) {
          INFO("prompt " << i);
          CHECK(drafted[i].tokens == plain[i].tokens);
          CHECK(same_bits(drafted[i].logits, plain[i].logits));
        }
      }
    }
  }
}

TEST_CASE("with drafts, a stop token ends generation where plain decoding stops",
          "[engine][speculation]") {
  speculation_fixture x;
  auto& [f, prompts, req, plain, spec] = x;
  // Each prompt in turn stops at its tenth token: the run must end exactly where plain decoding's
  // output first holds that token, drafts or not.
  for (size_t i = 0; i < prompts.size(); ++i) {
    request_options stopping = req;
    stopping.stop_ids = {plain[i].tokens[9]};
    const auto expected = run(f, {prompts[i]}, {}, stopping);
    const auto drafted = run(f, {prompts[i]}, spec, stopping);
    INFO("prompt " << i);
    CHECK(drafted[0].tokens == expected[0].tokens);
    CHECK(drafted[0].tokens.size() <= 10);
  }
}

TEST_CASE("no sequence drafts while more decode together than disable_above_batch",
          "[engine][speculation]") {
  speculation_fixture x;
  auto& [f, prompts, req, plain, spec] = x;
  spec.speculation.disable_above_batch = static_cast<int>(prompts.size()) - 1;
  // Every prompt is prefilled in the first step and all finish together: never few enough.
  speculation_stats crowded;
  const auto drafted = run(f, prompts, spec, req, &crowded);
  CHECK(crowded.drafted_tokens == 0);
  CHECK(crowded.batch_limited_steps > 0);
  for (size_t i = 0; i < prompts.size(); ++i)
    CHECK(drafted[i].tokens == plain[i].tokens);
  // At the threshold they draft.
  spec.speculation.disable_above_batch = static_cast<int>(prompts.size());
  speculation_stats allowed;
  run(f, prompts, spec, req, &allowed);
  CHECK(allowed.drafted_tokens > 0);
  CHECK(allowed.batch_limited_steps == 0);
}

// Speculative decoding with a draft model: the engine's output stays plain decoding's, token for
// token and bit for bit, whatever the draft says; the draft's own KV rolls back with rejections;
// and a draft the target cannot use is refused at load.
#include "model/draft_model.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>

#include "model/confidence_head.hpp"
#include "model/engine.hpp"
#include "model/model_writer.hpp"
#include "model/prompt_lookup.hpp"
#include "support/derived_draft.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::model;

namespace {

// A target checkpoint and a draft for it, loaded on one device.
struct draft_fixture {
  testing::temp_dir dir{"draft-model"};
  std::unique_ptr<gpu::backend> dev = gpu::make_cpu_backend();
  std::unique_ptr<loaded_model> target;
  std::shared_ptr<const loaded_model> draft;

  std::string target_dir() const { return dir.file("target"); }
  std::string draft_dir() const { return dir.file("draft"); }

  void load(const std::string& draft_path,
            draft_model::weight_format held = draft_model::weight_format::int8) {
    auto t = loaded_model::load(target_dir(), *dev, true);
    REQUIRE(t.ok());
    target = std::move(t.value());
    auto d = draft_model::load(draft_path, target->config, target_dir(), *dev, held);
    INFO((d.ok() ? "" : d.err().message));
    REQUIRE(d.ok());
    draft = d.value();
  }

  // A dense qwen3 target drafting with itself, held as stored: every greedy draft must hold.
  static std::unique_ptr<draft_fixture> self_drafting() {
    auto f = std::make_unique<draft_fixture>();
    REQUIRE(write_random_model(testing::small_model_spec(11, "qwen3"), f->target_dir()).ok());
    f->load(f->target_dir(), draft_model::weight_format::as_stored);
    return f;
  }
  // A qwen3_moe target with a random dense draft of the same vocabulary: nearly every draft fails.
  static std::unique_ptr<draft_fixture> random_draft() {
    auto f = std::make_unique<draft_fixture>();
    REQUIRE(write_random_model(testing::small_model_spec(11), f->target_dir()).ok());
    REQUIRE(write_random_model(testing::small_model_spec(12, "qwen3"), f->draft_dir()).ok());
    f->load(f->draft_dir());
    return f;
  }
  // A qwen3_moe target with a draft cut out of it: drafts both hold and fail.
  static std::unique_ptr<draft_fixture> derived_draft(
      draft_model::weight_format held = draft_model::weight_format::int8) {
    auto f = std::make_unique<draft_fixture>();
    const model_spec spec = testing::target_with_dense_layer(11);
    REQUIRE(write_random_model(spec, f->target_dir()).ok());
    testing::write_derived_draft(spec, f->target_dir(), f->draft_dir());
    f->load(f->draft_dir(), held);
    return f;
  }
};

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back((seed * 131 + i * 17) % 500);
  return p;
}

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 5; ++i)
    out.push_back(prompt(4 + 9 * i, i));
  return out;
}

struct run_result {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

engine_options drafting_with(const draft_fixture& f, int max_draft) {
  engine_options o;
  o.speculation.max_draft = max_draft;
  o.speculation.draft = draft_kind::model;
  o.speculation.draft_model = f.draft_dir();
  o.draft_weights = f.draft;
  return o;
}

std::vector<run_result> run(const draft_fixture& f, const engine_options& options,
                            request_options request, speculation_stats* stats = nullptr) {
  engine eng(*f.target, *f.dev, options);
  request.keep_logits = true;
  std::vector<int64_t> ids;
  for (const auto& p : prompts()) {
    auto id = eng.submit(p, request);
    REQUIRE(id.ok());
    ids.push_back(id.value());
  }
  eng.run_until_idle();
  std::vector<run_result> out;
  for (int64_t id : ids)
    out.push_back({eng.output(id), eng.kept_logits(id)});
  if (stats) *stats = eng.speculation();
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_same(const std::vector<run_result>& drafted, const std::vector<run_result>& plain) {
  REQUIRE(drafted.size() == plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("prompt " << i);
    CHECK(drafted[i].tokens == plain[i].tokens);
    CHECK(same_bits(drafted[i].logits, plain[i].logits));
  }
}

// The same drafts with the same features, bit for bit.
void check_same_drafts(const draft_proposal& got, const draft_proposal& want) {
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.features.size() == want.features.size());
  for (size_t i = 0; i < got.features.size(); ++i)
    CHECK(std::memcmp(&got.features[i], &want.features[i], sizeof(draft_feature)) == 0);
}

request_options greedy(int max_tokens) {
  request_options r;
  r.max_tokens = max_tokens;
  return r;
}

request_options sampled(int max_tokens) {
  request_options r = greedy(max_tokens);
  r.sampling.temperature = 0.3f;
  r.sampling.top_k = 8;
  r.sampling.seed = 7;
  return r;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v)
    total += x;
  return total;
}

}  // namespace

TEST_CASE("a draft model that is the target keeps every greedy draft, plain decoding's tokens",
          "[draft_model][speculation]") {
  auto f = draft_fixture::self_drafting();
  const auto plain = run(*f, {}, greedy(40));
  speculation_stats stats;
  const auto drafted = run(*f, drafting_with(*f, default_model_drafts), greedy(40), &stats);
  check_same(drafted, plain);
  INFO("drafted " << stats.drafted_tokens << ", accepted " << stats.accepted_tokens);
  // 5 prompts of 40 tokens: the first comes from the prefill, the other 39 from verify steps of
  // up to 5 drafts and a token of the target's own.
  REQUIRE(stats.drafted_tokens > 100);
  CHECK(stats.accepted_tokens == stats.drafted_tokens);
  REQUIRE(stats.drafted_at.size() == static_cast<size_t>(default_model_drafts));
  CHECK(stats.accepted_at == stats.drafted_at);
  CHECK(sum(stats.drafted_at) == stats.drafted_tokens);
  // Sampled output is still plain decoding's, though the greedy draft no longer always holds.
  speculation_stats sampled_stats;
  check_same(run(*f, drafting_with(*f, 3), sampled(40), &sampled_stats), run(*f, {}, sampled(40)));
  CHECK(sampled_stats.accepted_tokens > 0);
}

TEST_CASE("a draft held in int8 drafts as the checkpoint mostly does, and changes no token",
          "[draft_model][speculation]") {
  auto exact = draft_fixture::derived_draft(draft_model::weight_format::as_stored);
  auto int8 = draft_fixture::derived_draft(draft_model::weight_format::int8);
  if (gpu::make_int8_cpu_backend(nullptr) == nullptr) {
    // Without AVX512-VNNI the draft is held as stored: the same drafts.
    CHECK(int8->draft->forward->device().name() == "cpu");
    return;
  }
  REQUIRE(int8->draft->forward->device().name() == "cpu-int8");
  REQUIRE(exact->draft->forward->device().name() == "cpu");
  // The greedy drafts of both for the same contexts: mostly the same tokens, not all the same
  // bits (the int8 draft is a different, approximate forward).
  const draft_source_limits limits{4096, 16, 64};
  int same = 0, total = 0;
  bool features_differ = false;
  for (int seed = 0; seed < 12; ++seed) {
    const std::vector<int32_t> tokens = prompt(20 + seed, seed);
    std::vector<draft_proposal> a, b;
    draft_model(exact->draft, limits).propose({{1, &tokens, 4}}, a);
    draft_model(int8->draft, limits).propose({{1, &tokens, 4}}, b);
    REQUIRE(a[0].tokens.size() == 4);
    REQUIRE(b[0].tokens.size() == 4);
    // Compare the first drafts, which follow the same context in both.
    ++total;
    same += a[0].tokens[0] == b[0].tokens[0] ? 1 : 0;
    features_differ =
        features_differ || a[0].features[0].probability != b[0].features[0].probability;
  }
  INFO(same << " of " << total << " first drafts agree");
  CHECK(same >= total * 3 / 4);
  CHECK(features_differ);
  // Through the engine the int8 draft gives plain decoding's tokens and logits, bit for bit.
  for (const request_options& req : {greedy(32), sampled(32)}) {
    speculation_stats stats;
    const auto drafted = run(*int8, drafting_with(*int8, 4), req, &stats);
    INFO("drafted " << stats.drafted_tokens << ", accepted " << stats.accepted_tokens);
    REQUIRE(stats.accepted_tokens > 0);
    REQUIRE(stats.drafted_tokens > stats.accepted_tokens);
    check_same(drafted, run(*int8, {}, req));
  }
}

TEST_CASE("whatever a draft model says, the engine gives plain decoding's tokens and logits",
          "[draft_model][speculation]") {
  const bool derived = GENERATE(false, true);
  auto f = derived ? draft_fixture::derived_draft() : draft_fixture::random_draft();
  for (const request_options& req : {greedy(32), sampled(32)}) {
    const auto plain = run(*f, {}, req);
    for (auto [step_tokens, adaptive] : {std::pair{256, true}, {9, true}, {256, false}}) {
      engine_options spec = drafting_with(*f, 4);
      spec.max_step_tokens = step_tokens;
      spec.speculation.adaptive = adaptive;
      speculation_stats stats;
      const auto drafted = run(*f, spec, req, &stats);
      INFO("derived " << derived << ", temperature " << req.sampling.temperature << ", step budget "
                      << step_tokens << ", adaptive " << adaptive << ": drafted "
                      << stats.drafted_tokens << ", accepted " << stats.accepted_tokens);
      REQUIRE(stats.drafted_tokens > stats.accepted_tokens);
      // The draft cut out of the target agrees with it often: drafts were kept, too.
      if (derived) REQUIRE(stats.accepted_tokens > 0);
      CHECK(sum(stats.accepted_at) == stats.accepted_tokens);
      check_same(drafted, plain);
    }
  }
}

TEST_CASE("a draft model's KV rolls back with rejections: its drafts are a fresh draft's",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  const draft_source_limits limits{4096, 4, 16};  // small blocks and chunks: both are crossed
  draft_model kept(f->draft, limits);
  std::vector<int32_t> tokens = prompt(23, 3);
  for (int step = 0; step < 10; ++step) {
    INFO("step " << step);
    const int limit = 1 + step % 5;
    std::vector<draft_proposal> ours, fresh;
    kept.propose({{7, &tokens, limit}}, ours);
    draft_model(f->draft, limits).propose({{7, &tokens, limit}}, fresh);
    REQUIRE(ours.size() == 1);
    REQUIRE(ours[0].tokens.size() == static_cast<size_t>(limit));
    CHECK(ours[0].tokens == fresh[0].tokens);
    REQUIRE(ours[0].features.size() == ours[0].tokens.size());
    for (size_t i = 0; i < ours[0].features.size(); ++i) {
      const draft_feature& x = ours[0].features[i];
      const draft_feature& y = fresh[0].features[i];
      CHECK(std::memcmp(&x, &y, sizeof x) == 0);
      CHECK(x.index == static_cast<int32_t>(i));
      CHECK(x.position == static_cast<int32_t>(tokens.size() + i));
      CHECK(x.probability > 0.0f);
      CHECK(x.probability <= 1.0f);
      CHECK(x.entropy >= 0.0f);
      CHECK(x.entropy <= std::log(512.0f) + 1e-3f);
    }
    // Verification keeps some drafts (none, some, all in turn) and adds a token of its own.
    const int kept_drafts = (step * 3) % (limit + 1);
    tokens.insert(tokens.end(), ours[0].tokens.begin(), ours[0].tokens.begin() + kept_drafts);
    tokens.push_back((step * 37 + 5) % 500);
    kept.accepted(7, kept_drafts);
    CHECK(kept.stored_tokens(7) <= static_cast<int>(tokens.size()) - 1);
  }
  CHECK(kept.free_kv_blocks() < 4096 / 4);
  kept.release(7);
  CHECK(kept.sequences() == 0);
  CHECK(kept.free_kv_blocks() == 4096 / 4);
}

TEST_CASE("a draft model attends to its attention window: tokens before it change no draft",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  const int window = 8;
  // A row reaches back window - 1 positions a layer.
  const int reach = f->draft->config.num_layers * (window - 1);
  const int n = reach + 40;
  std::vector<int32_t> a = prompt(n, 3), b = a;
  for (int i = 0; i < n - 1 - reach; ++i)
    b[static_cast<size_t>(i)] = (a[static_cast<size_t>(i)] + 101) % 500;
  // Small blocks and chunks: the window crosses both.
  const draft_source_limits full{4096, 4, 16};
  draft_source_limits windowed = full;
  windowed.attention_window = window;
  auto drafts = [&](const draft_source_limits& limits, const std::vector<int32_t>& tokens) {
    std::vector<draft_proposal> out;
    draft_model(f->draft, limits).propose({{1, &tokens, 4}}, out);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].features.size() == 4);
    return out[0];
  };
  // Windowed, the tokens before the window's reach are never read: the same drafts, bit for bit.
  check_same_drafts(drafts(windowed, b), drafts(windowed, a));
  // With the whole context they are: the draft's probabilities differ.
  const draft_proposal whole_a = drafts(full, a), whole_b = drafts(full, b);
  CHECK(std::memcmp(&whole_a.features[0], &whole_b.features[0], sizeof(draft_feature)) != 0);
  // The source the engine makes takes its window from the speculation options, or where they
  // leave it unset (-1) from the draft's own draft_settings.json; without one, all positions.
  speculation_options options;
  options.max_draft = 4;
  options.draft = draft_kind::model;
  auto made = [&](const std::shared_ptr<const loaded_model>& weights) {
    std::vector<draft_proposal> out;
    make_draft_source(options, weights, full)->propose({{1, &b, 4}}, out);
    REQUIRE(out.size() == 1);
    return out[0];
  };
  options.draft_attention_window = window;
  check_same_drafts(made(f->draft), drafts(windowed, a));
  options.draft_attention_window = -1;
  check_same_drafts(made(f->draft), whole_b);
  std::ofstream(f->draft_dir() + "/draft_settings.json") << R"({"attention_window": 8})";
  auto own = draft_model::load(f->draft_dir(), f->target->config, f->target_dir(), *f->dev);
  REQUIRE(own.ok());
  CHECK(own.value()->attention_window == window);
  check_same_drafts(made(own.value()), drafts(windowed, a));
  options.draft_attention_window = 0;
  check_same_drafts(made(own.value()), whole_b);
  // A context within the window drafts as with the whole context.
  windowed.attention_window = n + 8;
  check_same_drafts(drafts(windowed, a), whole_a);

  // Through the engine, a windowed draft changes no token and no logit.
  for (const request_options& req : {greedy(32), sampled(32)}) {
    engine_options spec = drafting_with(*f, 4);
    spec.speculation.draft_attention_window = 5;
    speculation_stats stats;
    const auto drafted = run(*f, spec, req, &stats);
    INFO("temperature " << req.sampling.temperature << ": drafted " << stats.drafted_tokens
                        << ", accepted " << stats.accepted_tokens);
    REQUIRE(stats.accepted_tokens > 0);
    check_same(drafted, run(*f, {}, req));
  }
}

TEST_CASE("a confidence head's thresholds decide what a draft model verifies and computes",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  // Every draft predicted kept with 0.9: the cumulative predictions are 0.9, 0.81, 0.729, ...
  auto head_with = [](double threshold, double continue_threshold) {
    auto h = std::make_shared<confidence_head>();
    h->bias = std::log(0.9 / 0.1);
    h->threshold = threshold;
    h->continue_threshold = continue_threshold;
    return std::shared_ptr<const confidence_head>(h);
  };
  const std::vector<int32_t> tokens = prompt(20, 4);
  auto proposal = [&](double threshold, double continue_threshold) {
    draft_model m(f->draft, {4096, 16, 64}, head_with(threshold, continue_threshold));
    std::vector<draft_proposal> out;
    m.propose({{3, &tokens, 5}}, out);
    REQUIRE(out.size() == 1);
    return out[0];
  };
  // No cut: all five drafts, five forwards.
  CHECK(proposal(0.0, 0.0).tokens.size() == 5);
  CHECK(proposal(0.0, 0.0).computed == 5);
  // Verified while the product is at least 0.75: two drafts; the third (0.729) was computed and
  // cut.
  CHECK(proposal(0.75, 0.0).tokens.size() == 2);
  CHECK(proposal(0.75, 0.0).computed == 3);
  // Computing the next draft only while the product is at least 0.85: after 0.81 it stops, and
  // the forward the cut would have wasted is not taken.
  CHECK(proposal(0.75, 0.85).tokens.size() == 2);
  CHECK(proposal(0.75, 0.85).computed == 2);
  // A continue threshold alone stops drafting without cutting what was computed: 0.9, 0.81,
  // 0.729, then stop.
  CHECK(proposal(0.0, 0.75).tokens.size() == 3);
  CHECK(proposal(0.0, 0.75).computed == 3);
  // The same drafts, as far as each goes.
  const auto all = proposal(0.0, 0.0).tokens;
  const auto three = proposal(0.0, 0.75).tokens;
  CHECK(std::equal(three.begin(), three.end(), all.begin()));
}

TEST_CASE("prompt lookup behind the draft source drafts what draft_tokens drafts",
          "[draft_model][speculation]") {
  speculation_options o;
  o.max_draft = 5;
  prompt_lookup lookup(o);
  const std::vector<int32_t> context{1, 2, 3, 9, 1, 2, 3};
  std::vector<draft_proposal> out;
  lookup.propose({{1, &context, 5}, {2, &context, 2}}, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].tokens == draft_tokens(context, 5, o));
  CHECK(out[1].tokens == draft_tokens(context, 2, o));
  CHECK(out[0].features.empty());
  CHECK(make_draft_source(o, nullptr, {}) != nullptr);
  o.draft = draft_kind::none;
  CHECK(make_draft_source(o, nullptr, {}) == nullptr);
}

TEST_CASE("acceptance is counted per draft position", "[draft_model][speculation]") {
  speculation_stats a;
  a.add(3, 2);  // three drafts, the first kept
  a.add(2, 3);  // two drafts, both kept
  a.add(0, 1);  // no drafts: not a verify step
  CHECK(a.verify_steps == 2);
  CHECK(a.drafted_at == std::vector<int64_t>{2, 2, 1});
  CHECK(a.accepted_at == std::vector<int64_t>{2, 1, 0});
  speculation_stats b;
  b.add(4, 5);
  b.merge(a);
  CHECK(b.drafted_at == std::vector<int64_t>{3, 3, 2, 1});
  CHECK(b.accepted_at == std::vector<int64_t>{3, 2, 1, 1});
  CHECK(b.accepted_tokens == 7);
}

TEST_CASE("a draft the target cannot use is refused at load, naming both",
          "[draft_model][speculation]") {
  testing::temp_dir dir{"draft-refused"};
  const std::string target = dir.file("target");
  REQUIRE(write_random_model(testing::small_model_spec(11), target).ok());
  auto dev = gpu::make_cpu_backend();
  auto t = loaded_model::load(target, *dev, true);
  REQUIRE(t.ok());
  const model_config& c = t.value()->config;

  auto missing = draft_model::load(dir.file("nowhere"), c, target, *dev);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::not_found);
  CHECK_THAT(missing.err().message,
             Catch::Contains(dir.file("nowhere")) && Catch::Contains("does not exist"));

  model_spec small_vocab = testing::small_model_spec(12, "qwen3");
  small_vocab.vocab = 384;
  REQUIRE(write_random_model(small_vocab, dir.file("small-vocab")).ok());
  auto mismatch = draft_model::load(dir.file("small-vocab"), c, target, *dev);
  REQUIRE_FALSE(mismatch.ok());
  CHECK_THAT(mismatch.err().message, Catch::Contains(dir.file("small-vocab")) &&
                                         Catch::Contains(target) && Catch::Contains("384") &&
                                         Catch::Contains("512") &&
                                         Catch::Contains("share the target's tokenizer"));

  auto moe = draft_model::load(target, c, target, *dev);
  REQUIRE_FALSE(moe.ok());
  CHECK_THAT(moe.err().message,
             Catch::Contains("mixture of experts") && Catch::Contains("must be a dense model"));

  // A draft whose draft_settings.json is malformed, naming the file and what is wrong.
  const std::string draft = dir.file("draft");
  REQUIRE(write_random_model(testing::small_model_spec(13, "qwen3"), draft).ok());
  REQUIRE(draft_model::load(draft, c, target, *dev).ok());
  const std::string settings = draft + "/draft_settings.json";
  for (auto [text, says] : {std::pair{"{\"attention_window\": -2}", "'attention_window' is -2"},
                            {"{\"attention_window\": \"wide\"}", "'attention_window'"},
                            {"{\"attention_window\": 1.5}", "whole number"},
                            {"{\"window\": 64}", "'window' is not a known field"},
                            {"[256]", "not a JSON object"},
                            {"{\"attention_window\": ", "not a JSON object"}}) {
    std::ofstream(settings) << text;
    auto bad = draft_model::load(draft, c, target, *dev);
    INFO(text);
    REQUIRE_FALSE(bad.ok());
    CHECK_THAT(bad.err().message, Catch::Contains(settings) && Catch::Contains(says));
  }
  std::ofstream(settings) << R"({"attention_window": 0})";
  auto whole = draft_model::load(draft, c, target, *dev);
  REQUIRE(whole.ok());
  CHECK(whole.value()->attention_window == 0);
}

TEST_CASE("a draft model catches a long context up a chunk a step, drafting once it is in",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  draft_source_limits bounded_limits{4096, 4, 16};
  bounded_limits.catch_up_tokens = 40;
  draft_model bounded(f->draft, bounded_limits);
  draft_model at_once(f->draft, draft_source_limits{4096, 4, 16});
  const std::vector<int32_t> context = prompt(100, 3), short_context = prompt(5, 4);
  std::vector<draft_proposal> out;
  // 40 tokens of the long context, and no drafts for it; a sequence with only a few tokens to
  // feed is not held back by the bound.
  bounded.propose({{1, &context, 3}, {2, &short_context, 3}}, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].tokens.empty());
  CHECK(bounded.stored_tokens(1) == 40);
  CHECK(out[1].tokens.size() == 3);
  bounded.propose({{1, &context, 3}}, out);
  CHECK(out[0].tokens.empty());
  CHECK(bounded.stored_tokens(1) == 80);
  // The last 20 tokens: in, and it drafts what a draft fed the whole context at once drafts.
  bounded.propose({{1, &context, 3}}, out);
  std::vector<draft_proposal> whole;
  at_once.propose({{1, &context, 3}}, whole);
  REQUIRE(out[0].tokens.size() == 3);
  check_same_drafts(out[0], whole[0]);
}

TEST_CASE("a draft model follows a prompt as the target prefills it, and drafts at once after",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  // A catch-up bound of one token: a sequence that still needed its prompt fed would not draft.
  draft_source_limits limits{4096, 4, 16};
  limits.catch_up_tokens = 1;
  draft_model following(f->draft, limits);
  draft_model at_once(f->draft, draft_source_limits{4096, 4, 16});
  std::vector<int32_t> context = prompt(99, 5);
  // The target prefills 99 tokens in chunks of 30, 30 and 39; the draft follows each.
  for (int length : {30, 60, 99}) {
    following.prefilled({{4, &context, length}});
    CHECK(following.stored_tokens(4) == length);
  }
  following.prefilled({{4, &context, 99}});  // nothing new: nothing fed twice
  CHECK(following.stored_tokens(4) == 99);
  // The prefill's token joins; the first drafting step feeds it alone and drafts.
  context.push_back(123);
  std::vector<draft_proposal> ours, whole;
  following.propose({{4, &context, 3}}, ours);
  at_once.propose({{4, &context, 3}}, whole);
  REQUIRE(ours[0].tokens.size() == 3);
  check_same_drafts(ours[0], whole[0]);
  following.release(4);
  CHECK(following.free_kv_blocks() == 4096 / 4);
}

TEST_CASE("the engine's draft model takes prompts with their prefill: the first decode step drafts",
          "[draft_model][speculation]") {
  auto f = draft_fixture::derived_draft();
  engine_options o = drafting_with(*f, 3);
  o.max_step_tokens = 16;  // a 70-token prompt prefills in five steps
  for (bool gate : {false, true}) {
    INFO("measured gate " << gate);
    o.speculation.measured_gate = gate;
    engine eng(*f->target, *f->dev, o);
    REQUIRE(eng.submit(prompt(70, 2), greedy(20)).ok());
    std::vector<token_event> events;
    while (events.empty())
      REQUIRE(eng.step(events));  // the prefill, up to the first token
    CHECK(eng.speculation().verify_steps == 0);
    REQUIRE(eng.step(events));
    // Without the prompt in the draft, this step would feed it 16 tokens and draft nothing.
    CHECK(eng.speculation().verify_steps == 1);
  }
}

// Prompt-lookup drafting and draft verification, on hand-made contexts and logits.
#include "model/speculation.hpp"

#include <catch2/catch.hpp>
#include <random>

using namespace brigade::model;

namespace {

speculation_options drafting(int max_draft) {
  speculation_options o;
  o.max_draft = max_draft;
  return o;
}

// Rows of `vocab` logits whose argmax is the given token.
std::vector<float> rows_peaking_at(const std::vector<int32_t>& argmaxes, int vocab) {
  std::vector<float> rows(argmaxes.size() * static_cast<size_t>(vocab), 0.0f);
  for (size_t i = 0; i < argmaxes.size(); ++i)
    rows[i * static_cast<size_t>(vocab) + static_cast<size_t>(argmaxes[i])] = 5.0f;
  return rows;
}

}  // namespace

TEST_CASE("drafts follow the earlier continuation of the context's suffix", "[speculation]") {
  const std::vector<int32_t> context{1, 2, 3, 9, 1, 2, 3};
  CHECK(draft_tokens(context, 5, drafting(5)) == std::vector<int32_t>{9, 1, 2, 3, 9});
  CHECK(draft_tokens(context, 2, drafting(5)) == std::vector<int32_t>{9, 1});
  CHECK(draft_tokens(context, 0, drafting(5)).empty());
}

TEST_CASE("nothing is drafted without an earlier occurrence", "[speculation]") {
  CHECK(draft_tokens({1, 2, 3, 4, 5, 6}, 4, drafting(4)).empty());
  CHECK(draft_tokens({7}, 4, drafting(4)).empty());
  CHECK(draft_tokens({}, 4, drafting(4)).empty());
  // A one-token match is below the default min_ngram of 2.
  CHECK(draft_tokens({4, 8, 1, 4}, 4, drafting(4)).empty());
}

TEST_CASE("only continuations enough earlier occurrences agree on are trusted", "[speculation]") {
  // [5, 6] was followed by 1, 2 and 3: no continuation has half the votes.
  const std::vector<int32_t> split{5, 6, 1, 5, 6, 2, 5, 6, 3, 5, 6};
  CHECK(draft_tokens(split, 3, drafting(3)).empty());
  speculation_options lenient = drafting(1);
  lenient.min_trust = 0.3;
  // Ties go to the most recent continuation.
  CHECK(draft_tokens(split, 1, lenient) == std::vector<int32_t>{3});
  // Two of three agree: trusted at 0.5, not at 0.7.
  const std::vector<int32_t> majority{5, 6, 1, 9, 5, 6, 2, 8, 5, 6, 1, 7, 5, 6};
  CHECK(draft_tokens(majority, 1, drafting(1)) == std::vector<int32_t>{1});
  speculation_options strict = drafting(1);
  strict.min_trust = 0.7;
  CHECK(draft_tokens(majority, 1, strict).empty());
}

TEST_CASE("the longest matching suffix decides the draft", "[speculation]") {
  // [2, 3] alone was followed by 4 twice, but [1, 2, 3] was followed by 8.
  const std::vector<int32_t> context{1, 2, 3, 8, 0, 2, 3, 4, 2, 3, 4, 1, 2, 3};
  speculation_options o = drafting(1);
  CHECK(draft_tokens(context, 1, o) == std::vector<int32_t>{8});
  o.max_ngram = 2;
  CHECK(draft_tokens(context, 1, o) == std::vector<int32_t>{4});
}

TEST_CASE("the lookup searches only lookback_tokens back", "[speculation]") {
  std::vector<int32_t> context{1, 2, 7};
  for (int i = 0; i < 50; ++i)
    context.push_back(100 + i);
  context.insert(context.end(), {1, 2});
  speculation_options o = drafting(1);
  CHECK(draft_tokens(context, 1, o) == std::vector<int32_t>{7});
  o.lookback_tokens = 40;
  CHECK(draft_tokens(context, 1, o).empty());
}

// Verifies drafts of a sequence with no rules in force.
std::vector<int32_t> verify(const std::vector<float>& rows, int vocab, const sampling_params& p,
                            uint64_t first, const std::vector<int32_t>& drafts) {
  static const std::vector<int32_t> none;
  return verify_drafts(rows.data(), vocab, p, first, drafts, logits_rules(p, none, 0, none)).tokens;
}

TEST_CASE("verification keeps drafts while they equal the greedy token", "[speculation]") {
  const int vocab = 6;
  const auto rows = rows_peaking_at({2, 3, 1}, vocab);
  const sampling_params greedy;
  CHECK(verify(rows, vocab, greedy, 0, {2, 3}) == std::vector<int32_t>{2, 3, 1});
  CHECK(verify(rows, vocab, greedy, 0, {2, 0}) == std::vector<int32_t>{2, 3});
  CHECK(verify(rows, vocab, greedy, 0, {4, 3}) == std::vector<int32_t>{2});
  CHECK(verify(rows, vocab, greedy, 0, {}) == std::vector<int32_t>{2});
}

TEST_CASE("verified samples are the samples plain decoding draws at each index", "[speculation]") {
  const int vocab = 16;
  const int rows_count = 5;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::vector<float> rows(static_cast<size_t>(rows_count * vocab));
    for (float& x : rows)
      x = normal(rng);
    sampling_params p;
    p.temperature = 0.8f;
    p.top_p = 0.95f;
    p.seed = seed;
    const uint64_t first = seed * 3;
    std::vector<int32_t> plain;
    for (int i = 0; i < rows_count; ++i)
      plain.push_back(sample(&rows[static_cast<size_t>(i * vocab)], vocab, p, first + i));
    // Drafts equal to plain decoding's first two tokens, then a wrong one.
    std::vector<int32_t> drafts{plain[0], plain[1], (plain[2] + 1) % vocab, plain[3]};
    const auto produced = verify(rows, vocab, p, first, drafts);
    INFO("seed " << seed);
    REQUIRE(produced.size() == 3);
    CHECK(produced == std::vector<int32_t>(plain.begin(), plain.begin() + 3));
  }
}

TEST_CASE("verification under penalties draws what plain decoding draws token by token",
          "[speculation]") {
  const int vocab = 16;
  const int rows_count = 5;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  const std::vector<int32_t> stop_ids = {0};
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::vector<float> rows(static_cast<size_t>(rows_count * vocab));
    for (float& x : rows)
      x = normal(rng);
    sampling_params p;
    p.temperature = seed % 3 == 0 ? 0.0f : 0.9f;
    p.seed = seed;
    p.presence_penalty = 0.7f;
    p.frequency_penalty = 0.5f;
    p.repetition_penalty = 1.3f;
    p.logit_bias = {{3, 2.0f}, {5, -1.0f}};
    p.min_tokens = 5;
    const std::vector<int32_t> prompt = {1, 2, 3};
    // Plain decoding: one row at a time, the rules built afresh from the sequence so far.
    std::vector<int32_t> sequence = prompt, plain;
    std::vector<float> scratch;
    for (int i = 0; i < rows_count; ++i) {
      const logits_rules rules(p, sequence, static_cast<int>(plain.size()), stop_ids);
      const int32_t t = draw_token(&rows[static_cast<size_t>(i * vocab)], vocab, p,
                                   static_cast<uint64_t>(i), rules, -1, scratch)
                            .token;
      plain.push_back(t);
      sequence.push_back(t);
    }
    std::vector<int32_t> drafts{plain[0], plain[1], (plain[2] + 1) % vocab, plain[3]};
    const auto produced =
        verify_drafts(rows.data(), vocab, p, 0, drafts, logits_rules(p, prompt, 0, stop_ids));
    INFO("seed " << seed);
    REQUIRE(produced.tokens.size() == 3);
    CHECK(produced.tokens == std::vector<int32_t>(plain.begin(), plain.begin() + 3));
  }
}

TEST_CASE("speculation turns off above a batch size when asked to", "[speculation]") {
  speculation_options o;
  CHECK_FALSE(o.drafts_at(1));  // max_draft 0: off
  o.max_draft = 3;
  CHECK(o.drafts_at(1000));
  o.disable_above_batch = 4;
  CHECK(o.drafts_at(4));
  CHECK_FALSE(o.drafts_at(5));
}

TEST_CASE("a sequence drafts as far as its drafts hold and rests while they fail",
          "[speculation]") {
  speculation_options o = drafting(5);
  draft_window w(o);
  CHECK(w.take() == 5);
  w.record(o, 5, 2);  // two held: one more next time
  CHECK(w.take() == 3);
  w.record(o, 3, 3);
  CHECK(w.take() == 4);
  w.record(o, 4, 4);
  w.record(o, 5, 5);
  CHECK(w.take() == 5);  // never past max_draft
  w.record(o, 0, 0);     // a step without drafts says nothing
  CHECK(w.take() == 5);
  // None held: rest one step, then try one draft; failing again doubles the rest.
  w.record(o, 5, 0);
  CHECK(w.take() == 0);
  CHECK(w.take() == 1);
  w.record(o, 1, 0);
  CHECK(w.take() == 0);
  CHECK(w.take() == 0);
  CHECK(w.take() == 1);
  w.record(o, 1, 0);
  for (int i = 0; i < 4; ++i)
    CHECK(w.take() == 0);
  CHECK(w.take() == 1);
  // A draft that holds ends the rests.
  w.record(o, 1, 1);
  CHECK(w.take() == 2);
  w.record(o, 2, 0);
  CHECK(w.take() == 0);
  CHECK(w.take() == 1);
}

TEST_CASE("rests are bounded, and a fixed window always drafts max_draft", "[speculation]") {
  speculation_options o = drafting(3);
  draft_window w(o);
  for (int failures = 0; failures < 20; ++failures) {
    int rest = 0;
    while (w.take() == 0)
      ++rest;
    CHECK(rest <= draft_window::max_rest_steps);
    w.record(o, 1, 0);
  }
  o.adaptive = false;
  draft_window fixed(o);
  fixed.record(o, 3, 0);
  CHECK(fixed.take() == 3);
}

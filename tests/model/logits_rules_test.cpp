// The sampling rules against a plain restatement of OpenAI's and vLLM's definitions, the
// log-probabilities against a log-softmax written out here, and the bounds on every field.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/logits_rules.hpp"
#include "model/logprobs.hpp"
#include "model/sampler.hpp"

using namespace brigade::model;

namespace {

// The rules as the API documents them, one token at a time, counting occurrences by scanning.
std::vector<float> expected_row(const std::vector<float>& row, const sampling_params& p,
                                const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& generated,
                                const std::vector<int32_t>& stop_ids) {
  std::vector<float> z = row;
  const int vocab = static_cast<int>(row.size());
  for (const token_bias& b : p.logit_bias)
    z[static_cast<size_t>(b.token)] += b.bias;
  if (static_cast<int>(generated.size()) < p.min_tokens) {
    for (int32_t s : stop_ids)
      z[static_cast<size_t>(s)] = -std::numeric_limits<float>::infinity();
  }
  for (int t = 0; t < vocab; ++t) {
    int in_output = 0;
    bool anywhere = false;
    for (int32_t g : generated)
      in_output += g == t ? 1 : 0;
    for (int32_t q : prompt)
      anywhere = anywhere || q == t;
    anywhere = anywhere || in_output > 0;
    float& x = z[static_cast<size_t>(t)];
    if (anywhere && p.repetition_penalty != 1.0f)
      x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    if (in_output > 0)
      x -= static_cast<float>(in_output) * p.frequency_penalty + p.presence_penalty;
  }
  return z;
}

std::vector<float> random_row(std::mt19937& rng, int vocab) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row)
    x = normal(rng);
  return row;
}

}  // namespace

TEST_CASE("rules change a row exactly as OpenAI and vLLM define bias, min_tokens and penalties",
          "[logits_rules]") {
  const int vocab = 32;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  for (int round = 0; round < 100; ++round) {
    sampling_params p;
    p.presence_penalty = static_cast<float>(round % 5) * 0.4f - 0.8f;
    p.frequency_penalty = static_cast<float>(round % 7) * 0.3f - 0.9f;
    p.repetition_penalty = 0.5f + static_cast<float>(round % 4) * 0.4f;
    p.logit_bias = {{token(rng), 5.0f}, {token(rng), -100.0f}};
    p.min_tokens = round % 3 == 0 ? 4 : 0;
    std::vector<int32_t> prompt, generated;
    for (int i = 0; i < 6; ++i)
      prompt.push_back(token(rng));
    for (int i = 0; i < round % 9; ++i)
      generated.push_back(token(rng));
    const std::vector<int32_t> stop_ids = {1, 2};
    const std::vector<float> row = random_row(rng, vocab);
    std::vector<int32_t> sequence = prompt;
    sequence.insert(sequence.end(), generated.begin(), generated.end());
    const logits_rules rules(p, sequence, static_cast<int>(generated.size()), stop_ids);
    std::vector<float> scratch;
    const float* got = rules.apply(row.data(), vocab, scratch);
    const std::vector<float> want = expected_row(row, p, prompt, generated, stop_ids);
    INFO("round " << round);
    for (int t = 0; t < vocab; ++t)
      CHECK(got[t] == want[static_cast<size_t>(t)]);
    // The same rules reached token by token.
    logits_rules pushed(p, prompt, 0, stop_ids);
    for (int32_t g : generated)
      pushed.push(g);
    const float* again = pushed.apply(row.data(), vocab, scratch);
    for (int t = 0; t < vocab; ++t)
      CHECK(again[t] == want[static_cast<size_t>(t)]);
  }
}

TEST_CASE("without rules a row is used as it is", "[logits_rules]") {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  const std::vector<int32_t> tokens = {0, 1, 2}, stops = {2};
  const logits_rules rules(sampling_params{}, tokens, 2, stops);
  std::vector<float> scratch;
  CHECK_FALSE(rules.active());
  CHECK(rules.apply(row.data(), 3, scratch) == row.data());
}

TEST_CASE("min_tokens holds the stop ids back until enough tokens were generated",
          "[logits_rules]") {
  sampling_params p;
  p.min_tokens = 2;
  const std::vector<float> row = {0.0f, 9.0f, 1.0f};  // id 1, the stop id, is the likeliest
  const std::vector<int32_t> prompt = {0}, stops = {1};
  logits_rules rules(p, prompt, 0, stops);
  std::vector<float> scratch;
  CHECK(draw_token(row.data(), 3, p, 0, rules, -1, scratch).token == 2);
  rules.push(2);
  CHECK(draw_token(row.data(), 3, p, 1, rules, -1, scratch).token == 2);
  rules.push(2);
  CHECK(draw_token(row.data(), 3, p, 2, rules, -1, scratch).token == 1);
}

TEST_CASE("logprobs are the log-softmax of the row after the rules and the temperature",
          "[logits_rules]") {
  const int vocab = 50;
  std::mt19937 rng(5);
  for (float temperature : {0.0f, 0.5f, 1.0f, 1.7f}) {
    const std::vector<float> row = random_row(rng, vocab);
    sampling_params p;
    p.temperature = temperature;
    p.seed = 9;
    p.frequency_penalty = 0.6f;
    const std::vector<int32_t> tokens = {4, 4, 7}, stops;
    const logits_rules rules(p, tokens, 2, stops);
    std::vector<float> scratch;
    const drawn_token d = draw_token(row.data(), vocab, p, 3, rules, 5, scratch);
    const std::vector<float> z = expected_row(row, p, {4}, {4, 7}, stops);
    const double t = temperature > 0 ? temperature : 1.0;
    double sum = 0.0;
    for (float x : z)
      sum += std::exp(x / t);
    auto logprob = [&](int32_t id) { return z[static_cast<size_t>(id)] / t - std::log(sum); };
    INFO("temperature " << temperature);
    CHECK_THAT(d.logprobs.chosen.logprob, Catch::Matchers::WithinAbs(logprob(d.token), 1e-5));
    REQUIRE(d.logprobs.top.size() == 5);
    for (size_t i = 0; i < d.logprobs.top.size(); ++i) {
      CHECK_THAT(d.logprobs.top[i].logprob,
                 Catch::Matchers::WithinAbs(logprob(d.logprobs.top[i].token), 1e-5));
      if (i > 0) CHECK(d.logprobs.top[i].logprob <= d.logprobs.top[i - 1].logprob);
    }
    if (temperature == 0.0f) CHECK(d.token == d.logprobs.top[0].token);
  }
}

TEST_CASE("sampling parameters out of bounds are refused by name", "[logits_rules]") {
  auto refused = [](const sampling_params& p) {
    const brigade::status s = check_sampling(p, 100);
    REQUIRE_FALSE(s.ok());
    return s.err().message;
  };
  CHECK(check_sampling(sampling_params{}, 100).ok());
  sampling_params p;
  p.presence_penalty = 2.5f;
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("presence_penalty"));
  p = {};
  p.frequency_penalty = -3.0f;
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("frequency_penalty"));
  p = {};
  p.repetition_penalty = 0.0f;
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("repetition_penalty"));
  p = {};
  p.logit_bias = {{100, 1.0f}};
  CHECK_THAT(refused(p), Catch::Matchers::Contains("outside the vocabulary"));
  p = {};
  p.logit_bias = {{3, 101.0f}};
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("logit_bias"));
  p = {};
  p.min_tokens = -1;
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("min_tokens"));
  p = {};
  p.top_p = 0.0f;
  CHECK_THAT(refused(p), Catch::Matchers::StartsWith("top_p"));
}

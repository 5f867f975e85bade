// Choosing the next token from logits: greedy, temperature, top-k, top-p, with a seed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

/// A bias added to one token's logit (OpenAI's logit_bias).
struct token_bias {
  int32_t token = 0;
  float bias = 0.0f;
};

struct sampling_params {
  float temperature = 0.0f;  ///< 0 means greedy.
  int top_k = 0;             ///< 0 means no limit.
  float top_p = 1.0f;        ///< 1 means no nucleus cut.
  uint64_t seed = 0;
  // What the logits go through before any of the above (model/logits_rules.hpp applies them).
  float presence_penalty = 0.0f;    ///< Subtracted once from each token generated so far.
  float frequency_penalty = 0.0f;   ///< Subtracted per time a token was generated so far.
  float repetition_penalty = 1.0f;  ///< Shrinks the logits of tokens in the prompt or output.
  std::vector<token_bias> logit_bias;
  int min_tokens = 0;  ///< The stop ids cannot be drawn before this many tokens.
};

/// Bounds a request's sampling parameters must keep (the OpenAI API's and vLLM's).
constexpr float max_penalty = 2.0f;              ///< presence and frequency: [-2, 2]
constexpr float max_repetition_penalty = 10.0f;  ///< repetition: (0, 10]
constexpr float max_logit_bias = 100.0f;         ///< each bias: [-100, 100]
constexpr int max_logit_biases = 1024;

/// Whether `params` can be used with a vocabulary of `vocab`: the first field out of bounds
/// is named in the error.
status check_sampling(const sampling_params& params, int vocab);

/// The distribution `params` draws from: (token, probability) in descending probability order
/// (ties to the lower id), after temperature, top-k and top-p. Greedy gives one token with 1.
std::vector<std::pair<int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                              const sampling_params& params);

/// The next token. The random draw depends only on (seed, draw_index) — use the index of the
/// token being generated — so batching, re-dispatch and topology never change a sample.
int32_t sample(const float* logits, int vocab, const sampling_params& params, uint64_t draw_index);

/// A uniform number in [0, 1) that is a pure function of (seed, index).
double uniform_draw(uint64_t seed, uint64_t index);

/// Index of the largest logit, ties to the lowest index.
int32_t argmax(const float* logits, int vocab);

}  // namespace brigade::model

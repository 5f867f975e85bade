// Log-probabilities of tokens under the model's raw distribution (the softmax of the logits,
// before temperature, top-k or top-p): what OpenAI's logprobs report, and what the prefix cache's
// oracle compares bit for bit with and without a cache hit.
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::model {

struct token_logprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

/// One output position: the token chosen there, and the most likely tokens at it.
struct position_logprobs {
  token_logprob chosen;
  std::vector<token_logprob> top;  ///< Most likely first, ties to the lower id.
};

/// The most a request may ask for per position (OpenAI's own bound).
constexpr int max_top_logprobs = 20;

/// The log-softmax of `row` (vocab logits) at `chosen`, and its `top` most likely tokens.
/// Computed in double and rounded once: the same row gives the same bits on every path.
position_logprobs logprobs_at(const float* row, int vocab, int32_t chosen, int top);

}  // namespace brigade::model

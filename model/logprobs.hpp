// Log-probabilities of tokens under the distribution a token is drawn from: the softmax of the
// logits after the request's rules (model/logits_rules.hpp: bias, min_tokens, penalties) and its
// temperature, before top-k and top-p (vLLM's "processed" logprobs); greedy requests use
// temperature 1. What OpenAI's logprobs report, and what the prefix cache's oracle compares bit
// for bit with and without a cache hit.
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

/// The log-softmax of `row` / `temperature` (vocab logits; temperature <= 0 counts as 1) at
/// `chosen`, and its `top` most likely tokens. Computed in double and rounded once: the same row
/// gives the same bits on every path. A token the rules ruled out (-inf) gets -inf.
position_logprobs logprobs_at(const float* row, int vocab, int32_t chosen, int top,
                              float temperature = 1.0f);

/// Prompt log-probabilities: row j of `rows` (vocab logits each) is the model's prediction after
/// the prompt's token at some position p, and `next[j]` the prompt's token at p + 1. Appends one
/// entry per row: the log-softmax of the raw logits (temperature 1, no sampling rules: a prompt
/// token was never drawn), the chosen token being the prompt's own, with `top` alternatives.
void append_prompt_logprobs(const float* rows, int count, int vocab, const int32_t* next, int top,
                            std::vector<position_logprobs>& out);

}  // namespace brigade::model

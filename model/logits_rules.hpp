// What a request's sampling rules do to a row of logits before temperature, top-k and top-p:
// logit_bias, min_tokens, and the repetition, frequency and presence penalties, as OpenAI and vLLM
// define them. Applied in that order to the raw logits z of the next token:
//
//   z[t] += logit_bias[t]
//   z[s]  = -inf                        for every stop id s, while fewer than min_tokens generated
//   z[t]  = z[t] > 0 ? z[t] / r : z[t] * r     r = repetition_penalty, t in the prompt or output
//   z[t] -= count[t] * frequency_penalty + (count[t] > 0) * presence_penalty
//                                       count[t]: times t was generated so far (not the prompt)
//
// The engine and the workers apply the same rules to the same sequence, so every topology draws
// the same tokens; verify steps push accepted drafts one by one, so speculation stays exact.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/logprobs.hpp"
#include "model/sampler.hpp"

namespace brigade::model {

class logits_rules {
 public:
  /// Rules for the row that follows `tokens`, whose last `generated` tokens were generated (the
  /// rest is the prompt). `stop_ids` are the ids min_tokens holds back.
  logits_rules(const sampling_params& params, const std::vector<int32_t>& tokens, int generated,
               const std::vector<int32_t>& stop_ids);

  /// Whether any rule changes a row; when none does, rows are used as they are.
  bool active() const { return active_; }

  /// The row after the rules: `row` itself when no rule applies, else `scratch` filled with it.
  const float* apply(const float* row, int vocab, std::vector<float>& scratch) const;

  /// The next row follows one more generated token.
  void push(int32_t token);

 private:
  const sampling_params* params_;
  const std::vector<int32_t>* stop_ids_;
  bool active_ = false;
  bool penalties_ = false;
  int generated_ = 0;
  std::unordered_map<int32_t, int> counts_;  ///< generated tokens
  std::unordered_set<int32_t> seen_;         ///< prompt and generated tokens (repetition)
};

/// A token drawn from a row of logits after the rules.
struct drawn_token {
  int32_t token = 0;
  position_logprobs logprobs;  ///< Filled when asked for (top_logprobs >= 0).
};

/// Draws the token that follows `rules`' sequence from `row` with draw index `draw_index`, and
/// its log-probabilities when `top_logprobs` >= 0. `scratch` holds the adjusted row.
drawn_token draw_token(const float* row, int vocab, const sampling_params& params,
                       uint64_t draw_index, const logits_rules& rules, int top_logprobs,
                       std::vector<float>& scratch);

}  // namespace brigade::model

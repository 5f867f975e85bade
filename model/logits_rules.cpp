#include "model/logits_rules.hpp"

#include <algorithm>
#include <limits>

namespace brigade::model {

logits_rules::logits_rules(const sampling_params& params, const std::vector<int32_t>& tokens,
                           int generated, const std::vector<int32_t>& stop_ids)
    : params_(&params), stop_ids_(&stop_ids), generated_(generated) {
  const bool repetition = params.repetition_penalty != 1.0f;
  penalties_ = repetition || params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  active_ = penalties_ || !params.logit_bias.empty() || params.min_tokens > 0;
  if (!penalties_) return;
  const size_t first_generated =
      tokens.size() - std::min(tokens.size(), static_cast<size_t>(generated));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (repetition) seen_.insert(tokens[i]);
    if (i >= first_generated) ++counts_[tokens[i]];
  }
}

void logits_rules::push(int32_t token) {
  ++generated_;
  if (!penalties_) return;
  ++counts_[token];
  if (params_->repetition_penalty != 1.0f) seen_.insert(token);
}

const float* logits_rules::apply(const float* row, int vocab, std::vector<float>& scratch) const {
  if (!active_) return row;
  const sampling_params& p = *params_;
  scratch.assign(row, row + vocab);
  float* z = scratch.data();
  for (const token_bias& b : p.logit_bias)
    if (b.token >= 0 && b.token < vocab) z[b.token] += b.bias;
  if (generated_ < p.min_tokens) {
    for (int32_t s : *stop_ids_)
      if (s >= 0 && s < vocab) z[s] = -std::numeric_limits<float>::infinity();
  }
  const float r = p.repetition_penalty;
  if (r != 1.0f) {
    for (int32_t t : seen_)
      if (t >= 0 && t < vocab) z[t] = z[t] > 0 ? z[t] / r : z[t] * r;
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [t, n] : counts_) {
      if (t < 0 || t >= vocab) continue;
      z[t] -= static_cast<float>(n) * p.frequency_penalty + p.presence_penalty;
    }
  }
  return z;
}

drawn_token draw_token(const float* row, int vocab, const sampling_params& params,
                       uint64_t draw_index, const logits_rules& rules, int top_logprobs,
                       std::vector<float>& scratch) {
  const float* z = rules.apply(row, vocab, scratch);
  drawn_token out;
  out.token = sample(z, vocab, params, draw_index);
  if (top_logprobs >= 0)
    out.logprobs = logprobs_at(z, vocab, out.token, top_logprobs, params.temperature);
  return out;
}

}  // namespace brigade::model

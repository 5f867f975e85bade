#include "model/speculation.hpp"

#include <algorithm>
#include <cstddef>
#include <map>

namespace brigade::model {
namespace {

// The continuation most earlier occurrences of the context's last `n` tokens agree on, and the
// share that agrees; ties go to the most recent occurrence's continuation.
struct vote {
  int32_t token = -1;
  double trust = 0.0;
};

vote lookup(const std::vector<int32_t>& context, int n, int lookback) {
  const int size = static_cast<int>(context.size());
  if (size <= n) return {};
  const int32_t* suffix = context.data() + size - n;
  std::map<int32_t, int> counts;
  int occurrences = 0;
  int32_t best = -1;
  int best_count = 0;
  const int oldest = std::max(0, size - n - lookback);
  // Occurrences start at s and are followed by context[s + n]; scan from the most recent.
  for (int s = size - n - 1; s >= oldest; --s) {
    if (!std::equal(suffix, suffix + n, context.data() + s)) continue;
    const int32_t next = context[static_cast<size_t>(s + n)];
    const int count = ++counts[next];
    ++occurrences;
    if (count > best_count) {
      best_count = count;
      best = next;
    }
  }
  if (occurrences == 0) return {};
  return {best, static_cast<double>(best_count) / occurrences};
}

}  // namespace

const char* to_string(draft_kind k) {
  switch (k) {
    case draft_kind::none:
      return "none";
    case draft_kind::lookup:
      return "lookup";
    case draft_kind::model:
      return "model";
  }
  return "unknown";
}

std::vector<int32_t> draft_tokens(const std::vector<int32_t>& context, int limit,
                                  const speculation_options& options) {
  std::vector<int32_t> drafts;
  if (limit <= 0) return drafts;
  // The lookup never reads further back than lookback_tokens before its longest suffix, so only
  // that tail of the context is copied (a long context is not copied whole every step).
  const size_t tail =
      std::min(context.size(), static_cast<size_t>(options.lookback_tokens + options.max_ngram));
  std::vector<int32_t> extended(context.end() - static_cast<ptrdiff_t>(tail), context.end());
  while (static_cast<int>(drafts.size()) < limit) {
    vote v;
    for (int n = options.max_ngram; n >= options.min_ngram && v.token < 0; --n)
      v = lookup(extended, n, options.lookback_tokens);
    if (v.token < 0 || v.trust < options.min_trust) break;
    drafts.push_back(v.token);
    extended.push_back(v.token);
  }
  return drafts;
}

verified_tokens verify_drafts(const float* rows, int vocab, const sampling_params& sampling,
                              uint64_t first_draw, const std::vector<int32_t>& drafts,
                              logits_rules rules, int top_logprobs) {
  verified_tokens out;
  std::vector<float> scratch;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    drawn_token d = draw_token(rows + i * static_cast<size_t>(vocab), vocab, sampling,
                               first_draw + static_cast<uint64_t>(i), rules, top_logprobs, scratch);
    out.tokens.push_back(d.token);
    if (top_logprobs >= 0) out.logprobs.push_back(std::move(d.logprobs));
    if (i == drafts.size() || d.token != drafts[i]) break;
    rules.push(d.token);
  }
  return out;
}

void speculation_stats::add(int drafted, int produced) {
  if (drafted == 0) return;
  const int accepted = produced - 1;
  ++verify_steps;
  drafted_tokens += drafted;
  accepted_tokens += accepted;
  emitted_tokens += produced;
  if (drafted_at.size() < static_cast<size_t>(drafted)) {
    drafted_at.resize(static_cast<size_t>(drafted), 0);
    accepted_at.resize(static_cast<size_t>(drafted), 0);
  }
  for (int i = 0; i < drafted; ++i) {
    drafted_at[static_cast<size_t>(i)] += 1;
    if (i < accepted) accepted_at[static_cast<size_t>(i)] += 1;
  }
}

void speculation_stats::merge(const speculation_stats& other) {
  verify_steps += other.verify_steps;
  drafted_tokens += other.drafted_tokens;
  proposed_tokens += other.proposed_tokens;
  accepted_tokens += other.accepted_tokens;
  emitted_tokens += other.emitted_tokens;
  batch_limited_steps += other.batch_limited_steps;
  gated_steps += other.gated_steps;
  const size_t n = std::max(drafted_at.size(), other.drafted_at.size());
  drafted_at.resize(n, 0);
  accepted_at.resize(n, 0);
  for (size_t i = 0; i < other.drafted_at.size() && i < other.accepted_at.size(); ++i) {
    drafted_at[i] += other.drafted_at[i];
    accepted_at[i] += other.accepted_at[i];
  }
  calibration.merge(other.calibration);
}

}  // namespace brigade::model

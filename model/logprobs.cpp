#include "model/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace brigade::model {

position_logprobs logprobs_at(const float* row, int vocab, int32_t chosen, int top,
                              float temperature) {
  position_logprobs out;
  if (vocab <= 0) return out;
  const double scale = temperature > 0.0f ? 1.0 / static_cast<double>(temperature) : 1.0;
  const double max = static_cast<double>(*std::max_element(row, row + vocab)) * scale;
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i)
    sum += std::exp(static_cast<double>(row[i]) * scale - max);
  const double log_sum = std::log(sum) + max;
  auto logprob = [&](int32_t t) {
    return static_cast<float>(static_cast<double>(row[t]) * scale - log_sum);
  };
  if (chosen >= 0 && chosen < vocab) out.chosen = {chosen, logprob(chosen)};
  const int k = std::clamp(top, 0, vocab);
  if (k == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  for (int i = 0; i < k; ++i)
    out.top.push_back({ids[static_cast<size_t>(i)], logprob(ids[static_cast<size_t>(i)])});
  return out;
}

void append_prompt_logprobs(const float* rows, int count, int vocab, const int32_t* next, int top,
                            std::vector<position_logprobs>& out) {
  for (int j = 0; j < count; ++j)
    out.push_back(logprobs_at(rows + static_cast<size_t>(j) * static_cast<size_t>(vocab), vocab,
                              next[j], top));
}

}  // namespace brigade::model

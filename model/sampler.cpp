#include "model/sampler.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

namespace brigade::model {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The first index of the largest of row[0, n), as argmax's scalar scan finds it, eight lanes at a
// time; -1 where the row has a NaN (vector maxima would not say which value a scan keeps then).
// A scan carries its best index from one element to the next (a load and a compare each:
// 4.2 us over 4096 logits); this takes a maximum, then finds its first place (about a tenth).
int32_t first_largest(const float* row, int n) {
  int v = 0;
  __m256 top8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 unordered = _mm256_setzero_ps();
  for (; v + 8 <= n; v += 8) {
    const __m256 x = _mm256_loadu_ps(row + v);
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    top8 = _mm256_max_ps(top8, x);
  }
  if (_mm256_movemask_ps(unordered) != 0) return -1;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, top8);
  float top = lanes[0];
  for (int i = 1; i < 8; ++i)
    top = std::max(top, lanes[i]);
  for (int i = v; i < n; ++i) {
    if (std::isnan(row[i])) return -1;
    top = std::max(top, row[i]);
  }
  const __m256 wanted = _mm256_set1_ps(top);
  for (v = 0; v + 8 <= n; v += 8) {
    const int hits =
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + v), wanted, _CMP_EQ_OQ));
    if (hits != 0) return v + __builtin_ctz(static_cast<unsigned>(hits));
  }
  for (; v < n; ++v) {
    if (row[v] == top) return v;
  }
  return -1;
}

std::string number(double x) {
  std::string s = std::to_string(x);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

status check_sampling(const sampling_params& p, int vocab) {
  const auto bad = [](const std::string& field, const std::string& what) {
    return error(errc::invalid_argument, field + " " + what);
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return bad("temperature", number(p.temperature) + " is not a number >= 0");
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
    return bad("top_p", number(p.top_p) + " is not in (0, 1]");
  if (p.top_k < 0) return bad("top_k", std::to_string(p.top_k) + " < 0");
  for (const auto& [name, x] :
       {std::pair<const char*, float>{"presence_penalty", p.presence_penalty},
        {"frequency_penalty", p.frequency_penalty}}) {
    if (!std::isfinite(x) || x < -max_penalty || x > max_penalty)
      return bad(name, number(x) + " is not in [-2, 2]");
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0 ||
      p.repetition_penalty > max_repetition_penalty) {
    return bad("repetition_penalty", number(p.repetition_penalty) + " is not in (0, " +
                                         number(max_repetition_penalty) + "]");
  }
  if (p.logit_bias.size() > static_cast<size_t>(max_logit_biases))
    return bad("logit_bias", "holds " + std::to_string(p.logit_bias.size()) + " tokens; at most " +
                                 std::to_string(max_logit_biases));
  for (const token_bias& b : p.logit_bias) {
    if (b.token < 0 || b.token >= vocab)
      return bad("logit_bias", "names token " + std::to_string(b.token) +
                                   ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
    if (!std::isfinite(b.bias) || b.bias < -max_logit_bias || b.bias > max_logit_bias)
      return bad("logit_bias", "of token " + std::to_string(b.token) + " is " + number(b.bias) +
                                   ", not in [-100, 100]");
  }
  if (p.min_tokens < 0) return bad("min_tokens", std::to_string(p.min_tokens) + " < 0");
  return ok_status();
}

double uniform_draw(uint64_t seed, uint64_t index) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ (index * 0xd1b54a32d192ed03ull));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

int32_t argmax(const float* logits, int vocab) {
  const int32_t found = first_largest(logits, vocab);
  if (found >= 0) return found;
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

std::vector<std::pair<int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                              const sampling_params& params) {
  std::vector<std::pair<int32_t, double>> dist;
  if (params.temperature <= 0.0f) {
    dist.emplace_back(argmax(logits, vocab), 1.0);
    return dist;
  }
  const auto by_prob = [](const std::pair<int32_t, double>& a,
                          const std::pair<int32_t, double>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  const double max = logits[argmax(logits, vocab)];
  dist.reserve(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    dist.emplace_back(i, std::exp((static_cast<double>(logits[i]) - max) / params.temperature));
  }
  size_t keep = dist.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(dist.begin(), dist.begin() + static_cast<ptrdiff_t>(keep), dist.end(),
                      by_prob);
    dist.resize(keep);
  } else {
    std::sort(dist.begin(), dist.end(), by_prob);
  }
  double total = 0.0;
  for (const auto& d : dist)
    total += d.second;
  if (params.top_p < 1.0f) {
    // Keep the smallest prefix whose mass reaches top_p (at least one token).
    double mass = 0.0;
    size_t n = 0;
    while (n < dist.size()) {
      mass += dist[n].second / total;
      ++n;
      if (mass >= params.top_p) break;
    }
    dist.resize(n);
    total = 0.0;
    for (const auto& d : dist)
      total += d.second;
  }
  for (auto& d : dist)
    d.second /= total;
  return dist;
}

int32_t sample(const float* logits, int vocab, const sampling_params& params, uint64_t draw_index) {
  if (params.temperature <= 0.0f) return argmax(logits, vocab);
  const auto dist = sampling_distribution(logits, vocab, params);
  const double u = uniform_draw(params.seed, draw_index);
  double cumulative = 0.0;
  for (const auto& [token, p] : dist) {
    cumulative += p;
    if (u < cumulative) return token;
  }
  return dist.back().first;
}

}  // namespace brigade::model

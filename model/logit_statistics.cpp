#include "model/logit_statistics.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/cpu/vector_math.hpp"

namespace brigade::model {

namespace {

// The first index of the largest of row[0, n), as a scalar scan finds it; -1 where the row has a
// NaN (vector maxima would not say which value a scan keeps then).
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

}  // namespace

logit_statistics logit_statistics_of(const float* row, int n) {
  logit_statistics out;
  out.best = first_largest(row, n);
  if (out.best < 0) {
    out.best = 0;
    for (int v = 1; v < n; ++v) {
      if (row[v] > row[out.best]) out.best = v;
    }
  }
  // Softmax relative to the largest logit z_max: p(best) = 1 / sum e^(z - z_max), and the entropy
  // -sum p log p = log(sum) - sum p (z - z_max).
  // Shifts are clamped where e^shift is 0 in float anyway, so that a token masked to -inf adds
  // 0 x (a finite shift) to the weighted sum, not 0 x -inf.
  const float top = row[out.best];
  constexpr float lowest = -104.0f;
  const __m256 top8 = _mm256_set1_ps(top), lowest8 = _mm256_set1_ps(lowest);
  // Two streams of eight float lanes (their sums independent, so the exps overlap) over blocks
  // of 1024 tokens, the blocks summed in double: a vocabulary of 150k stays within float
  // rounding of the exact sums.
  double sum = 0.0, weighted = 0.0;
  int v = 0;
  while (v + 16 <= n) {
    __m256 sum_a = _mm256_setzero_ps(), weighted_a = _mm256_setzero_ps();
    __m256 sum_b = _mm256_setzero_ps(), weighted_b = _mm256_setzero_ps();
    for (const int end = std::min(n, v + 1024); v + 16 <= end; v += 16) {
      const __m256 shifted_a =
          _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(row + v), top8), lowest8);
      const __m256 shifted_b =
          _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(row + v + 8), top8), lowest8);
      const __m256 e_a = gpu::cpu::exp8(shifted_a);
      const __m256 e_b = gpu::cpu::exp8(shifted_b);
      sum_a = _mm256_add_ps(sum_a, e_a);
      sum_b = _mm256_add_ps(sum_b, e_b);
      weighted_a = _mm256_fmadd_ps(e_a, shifted_a, weighted_a);
      weighted_b = _mm256_fmadd_ps(e_b, shifted_b, weighted_b);
    }
    sum += gpu::cpu::horizontal_sum(_mm256_add_ps(sum_a, sum_b));
    weighted += gpu::cpu::horizontal_sum(_mm256_add_ps(weighted_a, weighted_b));
  }
  for (; v < n; ++v) {
    const double shifted =
        std::max(static_cast<double>(row[v]) - static_cast<double>(top), double{lowest});
    const double e = std::exp(shifted);
    sum += e;
    weighted += e * shifted;
  }
  out.probability = static_cast<float>(1.0 / sum);
  out.entropy = static_cast<float>(std::log(sum) - weighted / sum);
  return out;
}

}  // namespace brigade::model

#include "model/logit_statistics.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/cpu/vector_math.hpp"
#include "model/sampler.hpp"

namespace brigade::model {

logit_statistics logit_statistics_of(const float* row, int n) {
  logit_statistics out;
  out.best = argmax(row, n);
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

#include "model/logit_statistics.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/vector_math.hpp"

namespace brigade::model {

logit_statistics logit_statistics_of(const float* row, int n) {
  logit_statistics out;
  for (int v = 1; v < n; ++v) {
    if (row[v] > row[out.best]) out.best = v;
  }
  // Softmax relative to the largest logit z_max: p(best) = 1 / sum e^(z - z_max), and the entropy
  // -sum p log p = log(sum) - sum p (z - z_max).
  // Shifts are clamped where e^shift is 0 in float anyway, so that a token masked to -inf adds
  // 0 x (a finite shift) to the weighted sum, not 0 x -inf.
  const float top = row[out.best];
  constexpr float lowest = -104.0f;
  const __m256 top8 = _mm256_set1_ps(top), lowest8 = _mm256_set1_ps(lowest);
  // Eight float lanes over blocks of 1024 tokens, the blocks summed in double: a vocabulary of
  // 150k stays within float rounding of the exact sums.
  double sum = 0.0, weighted = 0.0;
  int v = 0;
  while (v + 8 <= n) {
    __m256 sum8 = _mm256_setzero_ps(), weighted8 = _mm256_setzero_ps();
    for (const int end = std::min(n, v + 1024); v + 8 <= end; v += 8) {
      const __m256 shifted = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(row + v), top8), lowest8);
      const __m256 e = gpu::cpu::exp8(shifted);
      sum8 = _mm256_add_ps(sum8, e);
      weighted8 = _mm256_fmadd_ps(e, shifted, weighted8);
    }
    sum += gpu::cpu::horizontal_sum(sum8);
    weighted += gpu::cpu::horizontal_sum(weighted8);
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

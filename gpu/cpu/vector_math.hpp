// Small AVX2 helpers shared by the CPU kernels. Every reduction runs in one fixed order, so a
// result depends only on its inputs, never on batch composition or threading.
#pragma once

#include <immintrin.h>

#include <cmath>

namespace brigade::gpu::cpu {

/// Sum of the eight lanes, always combined in the same tree order.
inline float horizontal_sum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Dot product: eight-lane FMA over full vectors, tree sum, then scalar FMAs for the tail.
inline float dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = horizontal_sum(acc);
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

/// acc[i] = fma(w, v[i], acc[i]).
inline void axpy(float w, const float* v, float* acc, int n) {
  const __m256 wv = _mm256_set1_ps(w);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
  }
  for (; i < n; ++i) acc[i] = std::fma(w, v[i], acc[i]);
}

}  // namespace brigade::gpu::cpu

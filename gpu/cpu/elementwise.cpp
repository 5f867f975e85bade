// Row-wise CPU kernels: norms, rotary embedding, activation, routing and combination.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/kernels.hpp"
#include "gpu/cpu/vector_math.hpp"

namespace brigade::gpu::cpu {
namespace {

// Rows per parallel chunk for cheap row-wise kernels.
size_t row_grain(int cols) {
  return static_cast<size_t>(std::max(1, 16384 / std::max(1, cols)));
}

}  // namespace

void rms_norm(const tensor& x, const float* weight, int group, float eps, const tensor& y,
              thread_pool& pool) {
  pool.parallel_for(static_cast<size_t>(x.rows), row_grain(x.cols), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      const float* in = x.row(static_cast<int>(r));
      float* out = y.row(static_cast<int>(r));
      for (int g = 0; g < x.cols; g += group) {
        const float mean_square = dot(in + g, in + g, group) / static_cast<float>(group);
        const float inv = 1.0f / std::sqrt(mean_square + eps);
        for (int i = 0; i < group; ++i)
          out[g + i] = (in[g + i] * inv) * weight[i];
      }
    }
  });
}

void rope(const tensor& x, const int32_t* positions, int heads, int head_dim,
          const float* cos_table, const float* sin_table, thread_pool& pool) {
  const int half = head_dim / 2;
  pool.parallel_for(static_cast<size_t>(x.rows), row_grain(x.cols), [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      const size_t pos = static_cast<size_t>(positions[r]);
      const float* c = cos_table + pos * static_cast<size_t>(half);
      const float* s = sin_table + pos * static_cast<size_t>(half);
      for (int h = 0; h < heads; ++h) {
        float* v = x.row(static_cast<int>(r)) + static_cast<ptrdiff_t>(h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const float x1 = v[i];
          const float x2 = v[i + half];
          v[i] = x1 * c[i] - x2 * s[i];
          v[i + half] = x2 * c[i] + x1 * s[i];
        }
      }
    }
  });
}

void silu_mul(const tensor& gate_up, const tensor& out, thread_pool& pool) {
  const int inter = out.cols;
  pool.parallel_for(static_cast<size_t>(out.rows), row_grain(inter), [&](size_t b, size_t e) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t r = b; r < e; ++r) {
      const float* gate = gate_up.row(static_cast<int>(r));
      const float* up = gate + inter;
      float* o = out.row(static_cast<int>(r));
      // Eight lanes with the eight-lane exp (a scalar std::exp per element was a tenth of a
      // decode step: docs/cpu_kernels.md), the tail with std::exp: an element's result depends
      // only on its place in the row, never on the batch.
      int i = 0;
      for (; i + 8 <= inter; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign))));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
      }
      for (; i < inter; ++i) {
        const float g = gate[i];
        o[i] = (g / (1.0f + std::exp(-g))) * up[i];
      }
    }
  });
}

void add(const tensor& x, const tensor& y) {
  for (int r = 0; r < x.rows; ++r) {
    float* a = x.row(r);
    const float* b = y.row(r);
    for (int i = 0; i < x.cols; ++i)
      a[i] = a[i] + b[i];
  }
}

void clamp(const tensor& x, float limit) {
  for (int r = 0; r < x.rows; ++r) {
    float* a = x.row(r);
    for (int i = 0; i < x.cols; ++i)
      a[i] = std::min(std::max(a[i], -limit), limit);
  }
}

void gather_rows(const tensor& src, const int32_t* rows, const tensor& dst) {
  for (int i = 0; i < dst.rows; ++i) {
    std::memcpy(dst.row(i), src.row(rows[i]), sizeof(float) * static_cast<size_t>(dst.cols));
  }
}

void scatter_rows(const tensor& src, const int32_t* rows, const tensor& dst) {
  for (int i = 0; i < src.rows; ++i) {
    std::memcpy(dst.row(rows[i]), src.row(i), sizeof(float) * static_cast<size_t>(src.cols));
  }
}

namespace {

// The index of the largest value[i] with available[i] set, the lowest on ties (and when values
// do not compare, as NaN does): the one selection rule of both routers.
int best_available(const std::vector<float>& value, const std::vector<char>& available) {
  int best = -1;
  for (size_t i = 0; i < value.size(); ++i) {
    if (available[i] && (best < 0 || value[i] > value[static_cast<size_t>(best)])) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

// DeepSeek-V3: sigmoid scores; the choice by score + bias within the best groups, the weights the
// unbiased scores. Ties go to the lower group and the lower expert.
void sigmoid_topk(const tensor& logits, const router_spec& spec, int32_t* experts, float* weights) {
  const int n = logits.cols;
  const int k = spec.top_k;
  const int per_group = n / spec.groups;
  std::vector<float> score(static_cast<size_t>(n));
  std::vector<float> choice(static_cast<size_t>(n));
  std::vector<float> group_score(static_cast<size_t>(spec.groups));
  std::vector<char> open(static_cast<size_t>(n));
  std::vector<char> group_open(static_cast<size_t>(spec.groups));
  for (int r = 0; r < logits.rows; ++r) {
    const float* l = logits.row(r);
    for (int i = 0; i < n; ++i) {
      score[static_cast<size_t>(i)] = 1.0f / (1.0f + std::exp(-l[i]));
      choice[static_cast<size_t>(i)] =
          score[static_cast<size_t>(i)] + (spec.host_bias ? spec.host_bias[i] : 0.0f);
    }
    // A group's score: the sum of its two best biased scores (its best alone for a group of one).
    for (int g = 0; g < spec.groups; ++g) {
      float first = -INFINITY, second = -INFINITY;
      for (int i = g * per_group; i < (g + 1) * per_group; ++i) {
        const float v = choice[static_cast<size_t>(i)];
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      group_score[static_cast<size_t>(g)] = per_group > 1 ? first + second : first;
    }
    std::fill(group_open.begin(), group_open.end(), 1);
    std::fill(open.begin(), open.end(), 0);
    for (int j = 0; j < spec.top_groups; ++j) {
      const int best = best_available(group_score, group_open);
      group_open[static_cast<size_t>(best)] = 0;
      for (int i = best * per_group; i < (best + 1) * per_group; ++i)
        open[static_cast<size_t>(i)] = 1;
    }
    int32_t* ids = experts + static_cast<ptrdiff_t>(r) * k;
    float* w = weights + static_cast<ptrdiff_t>(r) * k;
    float selected = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int best = best_available(choice, open);
      open[static_cast<size_t>(best)] = 0;
      ids[j] = best;
      w[j] = score[static_cast<size_t>(best)];
      selected += w[j];
    }
    for (int j = 0; j < k; ++j) {
      if (spec.normalize) w[j] /= selected + 1e-20f;
      w[j] *= spec.scale;
    }
  }
}

}  // namespace

void router_topk(const tensor& logits, const router_spec& spec, int32_t* experts, float* weights) {
  if (spec.sigmoid) return sigmoid_topk(logits, spec, experts, weights);
  const int n = logits.cols;
  const int k = spec.top_k;
  std::vector<float> prob(static_cast<size_t>(n));
  std::vector<char> open(static_cast<size_t>(n));
  for (int r = 0; r < logits.rows; ++r) {
    const float* l = logits.row(r);
    const float max = *std::max_element(l, l + n);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      prob[static_cast<size_t>(i)] = std::exp(l[i] - max);
      sum += prob[static_cast<size_t>(i)];
    }
    for (int i = 0; i < n; ++i)
      prob[static_cast<size_t>(i)] /= sum;
    std::fill(open.begin(), open.end(), 1);
    int32_t* ids = experts + static_cast<ptrdiff_t>(r) * k;
    float* w = weights + static_cast<ptrdiff_t>(r) * k;
    float selected = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int best = best_available(prob, open);
      open[static_cast<size_t>(best)] = 0;
      ids[j] = best;
      w[j] = prob[static_cast<size_t>(best)];
      selected += w[j];
    }
    if (spec.normalize) {
      for (int j = 0; j < k; ++j)
        w[j] /= selected;
    }
  }
}

void combine(const tensor& x, const tensor& y, const float* weights, int k, const tensor* shared,
             const tensor* shared_gate) {
  std::vector<float> acc(static_cast<size_t>(x.cols));
  for (int t = 0; t < x.rows; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int j = 0; j < k; ++j) {
      const int slot = t * k + j;
      axpy(weights[slot], y.row(slot), acc.data(), x.cols);
    }
    if (shared) {
      float scale = 1.0f;
      if (shared_gate) scale = 1.0f / (1.0f + std::exp(-shared_gate->row(t)[0]));
      axpy(scale, shared->row(t), acc.data(), x.cols);
    }
    float* out = x.row(t);
    for (int i = 0; i < x.cols; ++i)
      out[i] = out[i] + acc[static_cast<size_t>(i)];
  }
}

}  // namespace brigade::gpu::cpu

// Paged KV storage and causal attention on the CPU.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/kernels.hpp"
#include "gpu/cpu/vector_math.hpp"

namespace brigade::gpu::cpu {

cpu_kv_storage::cpu_kv_storage(const kv_layout& layout)
    : layout_(layout),
      row_floats_(static_cast<size_t>(layout.kv_heads) * static_cast<size_t>(layout.head_dim)) {
  const size_t total = static_cast<size_t>(layout.layers) * static_cast<size_t>(layout.blocks) *
                       static_cast<size_t>(layout.block_tokens) * row_floats_;
  keys_.assign(total, 0.0f);
  values_.assign(total, 0.0f);
}

namespace {

struct slot_ref {
  int block;
  int slot;
};

slot_ref locate(const attention_batch& batch, int seq, int pos, int block_tokens) {
  const int32_t* table = batch.block_ids + batch.block_offsets[seq];
  return {table[pos / block_tokens], pos % block_tokens};
}

}  // namespace

void kv_write(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
              const attention_batch& batch) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(k.cols);
  const int bt = kv.layout().block_tokens;
  for (int t = 0; t < batch.tokens; ++t) {
    const slot_ref s = locate(batch, batch.token_seq[t], batch.positions[t], bt);
    std::memcpy(kv.key(layer, s.block, s.slot), k.row(t), row_bytes);
    std::memcpy(kv.value(layer, s.block, s.slot), v.row(t), row_bytes);
  }
}

namespace {

// Positions [first, len) of one sequence, block by block: fn(p, rows, count) gets `count`
// consecutive positions from p whose rows (stride `stride` floats) start at `rows`. Walking
// blocks instead of locating each position saves a division per position.
template <class Fn>
void for_each_run(const cpu_kv_storage& kv, bool keys, int layer, const int32_t* table,
                  int block_tokens, int first, int len, Fn&& fn) {
  for (int p = first; p < len;) {
    const int block = table[p / block_tokens];
    const int slot = p % block_tokens;
    const int count = std::min(block_tokens - slot, len - p);
    fn(p, keys ? kv.key(layer, block, slot) : kv.value(layer, block, slot), count);
    p += count;
  }
}

// Scores of four keys at once: four independent FMA chains instead of one, each summed in
// exactly dot()'s order, so every score is bit for bit what dot() gives.
inline void dot4(const float* q, const float* k0, size_t stride, int n, float* out) {
  const float* k1 = k0 + stride;
  const float* k2 = k1 + stride;
  const float* k3 = k2 + stride;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), a0);
    a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + i), a1);
    a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + i), a2);
    a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + i), a3);
  }
  out[0] = horizontal_sum(a0);
  out[1] = horizontal_sum(a1);
  out[2] = horizontal_sum(a2);
  out[3] = horizontal_sum(a3);
  for (; i < n; ++i) {
    out[0] = std::fma(q[i], k0[i], out[0]);
    out[1] = std::fma(q[i], k1[i], out[1]);
    out[2] = std::fma(q[i], k2[i], out[2]);
    out[3] = std::fma(q[i], k3[i], out[3]);
  }
}

// scores[p] = dot(q, key p) * scale for `count` keys from `k` (rows `stride` apart).
void score_rows(const float* q, const float* k, size_t stride, int count, int head_dim, float scale,
                float* scores, float& max) {
  int r = 0;
  float four[4];
  for (; r + 4 <= count; r += 4) {
    dot4(q, k + static_cast<size_t>(r) * stride, stride, head_dim, four);
    for (int j = 0; j < 4; ++j) {
      scores[r + j] = four[j] * scale;
      max = std::max(max, scores[r + j]);
    }
  }
  for (; r < count; ++r) {
    scores[r] = dot(q, k + static_cast<size_t>(r) * stride, head_dim) * scale;
    max = std::max(max, scores[r]);
  }
}

// o += w[r] * value r for `count` values, in order: axpy()'s FMAs with `o` held in registers
// for a head of CHUNKS * 8 floats.
template <int CHUNKS>
void accumulate_rows(const float* v, size_t stride, int count, const float* w, float* o) {
  __m256 acc[CHUNKS];
  for (int c = 0; c < CHUNKS; ++c)
    acc[c] = _mm256_loadu_ps(o + 8 * c);
  for (int r = 0; r < count; ++r) {
    const float* row = v + static_cast<size_t>(r) * stride;
    const __m256 wr = _mm256_set1_ps(w[r]);
    for (int c = 0; c < CHUNKS; ++c)
      acc[c] = _mm256_fmadd_ps(wr, _mm256_loadu_ps(row + 8 * c), acc[c]);
  }
  for (int c = 0; c < CHUNKS; ++c)
    _mm256_storeu_ps(o + 8 * c, acc[c]);
}

void accumulate(const float* v, size_t stride, int count, const float* w, float* o, int head_dim) {
  if (head_dim == 64) return accumulate_rows<8>(v, stride, count, w, o);
  if (head_dim == 128) return accumulate_rows<16>(v, stride, count, w, o);
  for (int r = 0; r < count; ++r)
    axpy(w[r], v + static_cast<size_t>(r) * stride, o, head_dim);
}

// Softmax over scores[first, len) in place: exponentials eight at a time, summed lane by lane
// then in horizontal_sum's order (a fixed order: the row's result depends on nothing else).
void softmax_in_place(float* sc, int first, int len, float max) {
  const __m256 top = _mm256_set1_ps(max);
  __m256 lanes = _mm256_setzero_ps();
  int j = first;
  for (; j + 8 <= len; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), top));
    _mm256_storeu_ps(sc + j, e);
    lanes = _mm256_add_ps(lanes, e);
  }
  float sum = horizontal_sum(lanes);
  for (; j < len; ++j) {
    sc[j] = std::exp(sc[j] - max);
    sum += sc[j];
  }
  const __m256 total = _mm256_set1_ps(sum);
  for (j = first; j + 8 <= len; j += 8) {
    _mm256_storeu_ps(sc + j, _mm256_div_ps(_mm256_loadu_ps(sc + j), total));
  }
  for (; j < len; ++j)
    sc[j] /= sum;
}

// Query tiles: up to this many consecutive tokens of one sequence share each pass over its
// keys and values, which then come from L1 instead of L3 once per token.
constexpr int tile_tokens = 8;

// One tile of tokens [t0, t0 + n) of one sequence, one head.
struct tile_job {
  int t0 = 0;
  int n = 0;
};

std::vector<tile_job> make_tiles(const attention_batch& batch) {
  std::vector<tile_job> tiles;
  for (int t = 0; t < batch.tokens;) {
    int n = 1;
    while (n < tile_tokens && t + n < batch.tokens &&
           batch.token_seq[t + n] == batch.token_seq[t]) {
      ++n;
    }
    tiles.push_back({t, n});
    t += n;
  }
  return tiles;
}

}  // namespace

// Every (token, head) gets the same operations in the same order whatever tile it is in: its
// scores in position order (dot()), its softmax, then its weighted sum of values in position
// order starting from zero. Tiling only changes which token's operations interleave, so a row's
// result never depends on the rest of the batch.
void attention(const tensor& q, const cpu_kv_storage& kv, int layer, const attention_batch& batch,
               int heads, float scale, int window, const tensor& out, thread_pool& pool) {
  const kv_layout& lay = kv.layout();
  const int head_dim = lay.head_dim;
  const int group = heads / lay.kv_heads;
  const int bt = lay.block_tokens;
  const size_t stride = static_cast<size_t>(lay.kv_heads) * static_cast<size_t>(head_dim);
  const std::vector<tile_job> tiles = make_tiles(batch);
  const size_t items = tiles.size() * static_cast<size_t>(heads);
  pool.parallel_for(items, 1, [&](size_t begin, size_t end) {
    thread_local std::vector<float> scores;
    for (size_t item = begin; item < end; ++item) {
      const tile_job& tile = tiles[item / static_cast<size_t>(heads)];
      const int h = static_cast<int>(item % static_cast<size_t>(heads));
      const size_t offset = static_cast<size_t>(h / group) * static_cast<size_t>(head_dim);
      const int32_t* table = batch.block_ids + batch.block_offsets[batch.token_seq[tile.t0]];
      int first[tile_tokens], len[tile_tokens];
      float max[tile_tokens];
      const float* qv[tile_tokens];
      int lo = INT32_MAX, hi = 0;
      for (int i = 0; i < tile.n; ++i) {
        const int t = tile.t0 + i;
        len[i] = batch.positions[t] + 1;
        first[i] = window > 0 ? std::max(0, len[i] - window) : 0;
        max[i] = -INFINITY;
        qv[i] = q.row(t) + static_cast<ptrdiff_t>(h) * head_dim;
        lo = std::min(lo, first[i]);
        hi = std::max(hi, len[i]);
      }
      scores.resize(static_cast<size_t>(tile.n) * static_cast<size_t>(hi));
      float* sc[tile_tokens];
      for (int i = 0; i < tile.n; ++i)
        sc[i] = scores.data() + static_cast<size_t>(i) * hi;
      // Each run of keys (one block's) is read once from memory and then from L1 per token.
      for_each_run(kv, true, layer, table, bt, lo, hi, [&](int p, const float* rows, int count) {
        for (int i = 0; i < tile.n; ++i) {
          const int b = std::max(p, first[i]), e = std::min(p + count, len[i]);
          if (b >= e) continue;
          score_rows(qv[i], rows + static_cast<size_t>(b - p) * stride + offset, stride, e - b,
                     head_dim, scale, sc[i] + b, max[i]);
        }
      });
      for (int i = 0; i < tile.n; ++i) {
        softmax_in_place(sc[i], first[i], len[i], max[i]);
        float* o = out.row(tile.t0 + i) + static_cast<ptrdiff_t>(h) * head_dim;
        std::fill(o, o + head_dim, 0.0f);
      }
      for_each_run(kv, false, layer, table, bt, lo, hi, [&](int p, const float* rows, int count) {
        for (int i = 0; i < tile.n; ++i) {
          const int b = std::max(p, first[i]), e = std::min(p + count, len[i]);
          if (b >= e) continue;
          accumulate(rows + static_cast<size_t>(b - p) * stride + offset, stride, e - b, sc[i] + b,
                     out.row(tile.t0 + i) + static_cast<ptrdiff_t>(h) * head_dim, head_dim);
        }
      });
    }
  });
}

}  // namespace brigade::gpu::cpu

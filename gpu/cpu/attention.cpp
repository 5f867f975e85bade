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

// Eight keys' dot products with q as one vector (lane j: key j): eight FMA chains over the
// head's 8-float chunks, then a transposing tree of horizontal adds in a fixed order. `n` is a
// multiple of 8.
inline __m256 dot8(const float* q, const float* const* k, int n) {
  __m256 a[8];
  for (int j = 0; j < 8; ++j)
    a[j] = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int j = 0; j < 8; ++j)
      a[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[j] + i), a[j]);
  }
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // keys 0-3: low 128-bit halves, then high halves
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // keys 4-7 likewise
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Keys are scored in chunks of this many positions (a multiple of 8, aligned to it): each
// chunk's keys are read once per tile and then come from L1 for every token of the tile.
constexpr int key_chunk = 64;

// scores[p] = q . key p * scale for p in [b, e), `keys[p - base]` pointing at key p: eight at a
// time over whole aligned groups [8m, 8m + 8), one at a time (dot()) at ragged ends. How a
// score is computed depends only on its position and the token's range, never on block size,
// chunking or the batch.
void score_range(const float* q, const float* const* keys, int base, int b, int e, int head_dim,
                 float scale, float* scores, float& max) {
  int p = b;
  const int aligned = head_dim % 8 == 0 ? std::min(e, (b + 7) / 8 * 8) : e;
  for (; p < aligned; ++p) {
    scores[p] = dot(q, keys[p - base], head_dim) * scale;
    max = std::max(max, scores[p]);
  }
  if (p + 8 <= e) {
    const __m256 s = _mm256_set1_ps(scale);
    __m256 top = _mm256_set1_ps(max);
    for (; p + 8 <= e; p += 8) {
      const __m256 v = _mm256_mul_ps(dot8(q, keys + (p - base), head_dim), s);
      _mm256_storeu_ps(scores + p, v);
      top = _mm256_max_ps(top, v);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, top);
    for (float l : lanes)
      max = std::max(max, l);
  }
  for (; p < e; ++p) {
    scores[p] = dot(q, keys[p - base], head_dim) * scale;
    max = std::max(max, scores[p]);
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

// Every (token, head) gets the same operations in the same order whatever tile, chunk or block
// layout it is in: its scores by score_range()'s rule (a function of positions alone), its
// softmax, then its weighted sum of values in position order starting from zero. Tiling only
// changes which token's operations interleave, so a row's result never depends on the rest of the
// batch.
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
      // Chunk by chunk: the chunk's keys are read once, then from L1 for each token.
      const float* keys[key_chunk];
      for (int cs = lo / key_chunk * key_chunk; cs < hi; cs += key_chunk) {
        const int b0 = std::max(cs, lo), e0 = std::min(cs + key_chunk, hi);
        for_each_run(kv, true, layer, table, bt, b0, e0, [&](int p, const float* rows, int count) {
          for (int r = 0; r < count; ++r)
            keys[p + r - cs] = rows + static_cast<size_t>(r) * stride + offset;
        });
        for (int i = 0; i < tile.n; ++i) {
          const int b = std::max(b0, first[i]), e = std::min(e0, len[i]);
          if (b < e) score_range(qv[i], keys, cs, b, e, head_dim, scale, sc[i], max[i]);
        }
      }
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

// Causal attention over the paged KV storage on the CPU (kv_storage.hpp holds its layout).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "gpu/cpu/kernels.hpp"
#include "gpu/cpu/vector_math.hpp"

namespace brigade::gpu::cpu {

namespace {

// The keys (by row or by column) or value rows at `slot` of `block` in `layer`, as the storage
// holds them: float32, or bfloat16 bits.
template <class T>
const T* rows_at(const cpu_kv_storage& kv, bool keys, int layer, int block, int slot) {
  return keys ? kv.keys_at<T>(layer, block, slot) : kv.values_at<T>(layer, block, slot);
}

inline float to_float(float x) {
  return x;
}
inline float to_float(uint16_t x) {
  return bf16_to_f32(x);
}

// n bfloat16 elements widened exactly to float32 (their bits are a float32's upper half), so
// attention over a bf16 storage computes exactly what it computes over float32 rows holding the
// same rounded values.
void copy_row(const uint16_t* in, int n, float* out) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i)
    out[i] = bf16_to_f32(in[i]);
}

// Positions [first, len) of one sequence, block by block: fn(p, rows, count) gets `count`
// consecutive positions from p whose rows (stride `stride` elements) start at `rows`. Walking
// blocks instead of locating each position saves a division per position.
template <class T, class Fn>
void for_each_run(const cpu_kv_storage& kv, bool keys, int layer, const int32_t* table,
                  int block_tokens, int first, int len, Fn&& fn) {
  for (int p = first; p < len;) {
    const int block = table[p / block_tokens];
    const int slot = p % block_tokens;
    const int count = std::min(block_tokens - slot, len - p);
    fn(p, rows_at<T>(kv, keys, layer, block, slot), count);
    p += count;
  }
}

// Attention runs chunk by chunk of 64 positions (aligned to absolute positions) as two small
// matrix products, each with a register tile of up to `block_rows` query rows by 16 columns, the
// shape of the matmul kernel, and an online softmax between them:
//   scores[r][p] = (sum over d, in order, of q[r][d] * key[p][d]) * scale
//   w[r][p]      = exp(scores[r][p] - running max of row r); out and sum rescaled when it grows
//   out[r][d]   += w[r][p] * value[p][d] for the chunk's positions, in order
// and finally out / sum. Every operation on a row depends only on the row's own positions and the
// fixed chunk grid, so its result never depends on the tile, block size or batch it is in.
constexpr int chunk_positions = 64;
constexpr int block_rows = 6;

// Elements [d, d + 8) of eight rows (`stride` floats apart), transposed with the usual
// unpack-shuffle-permute 8x8 transpose: out[i] holds element d + i of each row.
inline __attribute__((always_inline)) void transpose_8x8(const float* rows, size_t stride, int d,
                                                         __m256 out[8]) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(rows + static_cast<size_t>(i) * stride + d);
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  out[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Eight consecutive keys (rows `stride` floats apart) into eight columns of a transposed chunk.
void transpose_8_keys(const float* rows, size_t stride, int head_dim, float* columns) {
  int d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    __m256 out[8];
    transpose_8x8(rows, stride, d, out);
    for (int i = 0; i < 8; ++i)
      _mm256_storeu_ps(columns + static_cast<size_t>(d + i) * chunk_positions, out[i]);
  }
  for (; d < head_dim; ++d) {
    for (int i = 0; i < 8; ++i)
      columns[static_cast<size_t>(d) * chunk_positions + i] =
          rows[static_cast<size_t>(i) * stride + d];
  }
}

// One chunk's keys of one KV head, transposed: kt[d * chunk_positions + j] is key (base + j)'s
// element d. Positions outside [b, e) are zero (their scores are computed and never read).
// bfloat16 keys are widened eight rows at a time into `widened` (8 * head_dim floats) first.
template <class T>
void transpose_keys(const cpu_kv_storage& kv, int layer, const int32_t* table, int block_tokens,
                    int b, int e, int base, size_t stride, size_t offset, int head_dim, float* kt,
                    float* widened) {
  if (b > base || e < base + chunk_positions) {
    std::fill(kt, kt + static_cast<size_t>(head_dim) * chunk_positions, 0.0f);
  }
  for_each_run<T>(kv, true, layer, table, block_tokens, b, e, [&](int p, const T* rows, int count) {
    int r = 0;
    for (; r + 8 <= count; r += 8) {
      const T* first = rows + static_cast<size_t>(r) * stride + offset;
      if constexpr (std::is_same_v<T, float>) {
        transpose_8_keys(first, stride, head_dim, kt + (p + r - base));
      } else {
        for (int i = 0; i < 8; ++i) {
          copy_row(first + static_cast<size_t>(i) * stride, head_dim,
                   widened + static_cast<size_t>(i) * head_dim);
        }
        transpose_8_keys(widened, static_cast<size_t>(head_dim), head_dim, kt + (p + r - base));
      }
    }
    for (; r < count; ++r) {
      const T* key = rows + static_cast<size_t>(r) * stride + offset;
      float* column = kt + (p + r - base);
      for (int d = 0; d < head_dim; ++d)
        column[static_cast<size_t>(d) * chunk_positions] = to_float(key[d]);
    }
  });
}

// Up to six rows by sixteen columns of accumulators, as named variables: GCC keeps these in
// registers, where an array of them would go to the stack on every iteration.
struct tile_acc {
  __m256 l0, h0, l1, h1, l2, h2, l3, h3, l4, h4, l5, h5;
};

// acc row r += s(r) * (lo, hi) for the tile's ROWS rows; s(r) broadcasts row r's scalar.
template <int ROWS, class Scalar>
inline __attribute__((always_inline)) void fma_rows(tile_acc& c, __m256 lo, __m256 hi, Scalar&& s) {
  __m256 x = s(0);
  c.l0 = _mm256_fmadd_ps(x, lo, c.l0);
  c.h0 = _mm256_fmadd_ps(x, hi, c.h0);
  if constexpr (ROWS > 1) {
    x = s(1);
    c.l1 = _mm256_fmadd_ps(x, lo, c.l1);
    c.h1 = _mm256_fmadd_ps(x, hi, c.h1);
  }
  if constexpr (ROWS > 2) {
    x = s(2);
    c.l2 = _mm256_fmadd_ps(x, lo, c.l2);
    c.h2 = _mm256_fmadd_ps(x, hi, c.h2);
  }
  if constexpr (ROWS > 3) {
    x = s(3);
    c.l3 = _mm256_fmadd_ps(x, lo, c.l3);
    c.h3 = _mm256_fmadd_ps(x, hi, c.h3);
  }
  if constexpr (ROWS > 4) {
    x = s(4);
    c.l4 = _mm256_fmadd_ps(x, lo, c.l4);
    c.h4 = _mm256_fmadd_ps(x, hi, c.h4);
  }
  if constexpr (ROWS > 5) {
    x = s(5);
    c.l5 = _mm256_fmadd_ps(x, lo, c.l5);
    c.h5 = _mm256_fmadd_ps(x, hi, c.h5);
  }
}

// Calls f(r, lo, hi) with each of the tile's ROWS rows of accumulators.
template <int ROWS, class Fn>
inline __attribute__((always_inline)) void for_acc_rows(tile_acc& c, Fn&& f) {
  f(0, c.l0, c.h0);
  if constexpr (ROWS > 1) f(1, c.l1, c.h1);
  if constexpr (ROWS > 2) f(2, c.l2, c.h2);
  if constexpr (ROWS > 3) f(3, c.l3, c.h3);
  if constexpr (ROWS > 4) f(4, c.l4, c.h4);
  if constexpr (ROWS > 5) f(5, c.l5, c.h5);
}

// The scalar each of a tile's rows broadcasts, from `base[r]` (rows past ROWS repeat row 0 and
// are never read).
template <int ROWS>
struct row_pointers {
  const float* p[6];
  explicit row_pointers(const float* const* base) {
    for (int r = 0; r < 6; ++r)
      p[r] = base[r < ROWS ? r : 0];
  }
  __m256 broadcast(int r, int offset) const { return _mm256_broadcast_ss(p[r] + offset); }
};

// scores[r][col0 + 0..15] for ROWS rows: q rows at q[r], transposed keys from kt + col0.
template <int ROWS>
void score_tile(const float* const* q, const float* kt, int head_dim, float scale,
                float* const* scores, int col0) {
  static_assert(ROWS >= 1 && ROWS <= 6, "tiles have 1 to 6 rows");
  tile_acc c;
  for_acc_rows<ROWS>(c, [](int, __m256& lo, __m256& hi) { lo = hi = _mm256_setzero_ps(); });
  const row_pointers<ROWS> rows(q);
  const float* k = kt + col0;
  for (int d = 0; d < head_dim; ++d, k += chunk_positions) {
    fma_rows<ROWS>(c, _mm256_loadu_ps(k), _mm256_loadu_ps(k + 8),
                   [&](int r) { return rows.broadcast(r, d); });
  }
  const __m256 s = _mm256_set1_ps(scale);
  for_acc_rows<ROWS>(c, [&](int r, __m256& lo, __m256& hi) {
    _mm256_storeu_ps(scores[r] + col0, _mm256_mul_ps(lo, s));
    _mm256_storeu_ps(scores[r] + col0 + 8, _mm256_mul_ps(hi, s));
  });
}

template <int ROWS>
void score_rows(const float* const* q, const float* kt, int head_dim, float scale,
                float* const* scores, int col_begin, int col_end) {
  for (int col = col_begin; col < col_end; col += 16)
    score_tile<ROWS>(q, kt, head_dim, scale, scores, col);
}

// The same scores straight from the keys where they are stored, for a tile of at most
// block_rows rows (a decode step's query heads of one KV head): each group of eight keys is
// transposed in registers and used at once, where writing a transposed chunk would cost as much
// as the products. Every score is the same chain as score_tile's: +0, then fma(q[d], key[d])
// for d in order, then times scale. scores[r] is indexed by position; `keys` holds the run's
// keys from position p, `stride` floats apart.
template <int ROWS>
void score_run(const float* const* q, const float* keys, size_t stride, int head_dim, float scale,
               float* const* scores, int p, int count) {
  static_assert(ROWS >= 1 && ROWS <= block_rows, "one register block of rows");
  const __m256 s = _mm256_set1_ps(scale);
  int j = 0;
  for (; j + 8 <= count; j += 8) {
    const float* rows = keys + static_cast<size_t>(j) * stride;
    __m256 acc[ROWS];
    for (int r = 0; r < ROWS; ++r)
      acc[r] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= head_dim; d += 8) {
      __m256 column[8];
      transpose_8x8(rows, stride, d, column);
      for (int i = 0; i < 8; ++i) {
        for (int r = 0; r < ROWS; ++r)
          acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[r] + d + i), column[i], acc[r]);
      }
    }
    for (; d < head_dim; ++d) {
      alignas(32) float element[8];
      for (int i = 0; i < 8; ++i)
        element[i] = rows[static_cast<size_t>(i) * stride + static_cast<size_t>(d)];
      const __m256 column = _mm256_load_ps(element);
      for (int r = 0; r < ROWS; ++r)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[r] + d), column, acc[r]);
    }
    for (int r = 0; r < ROWS; ++r)
      _mm256_storeu_ps(scores[r] + p + j, _mm256_mul_ps(acc[r], s));
  }
  for (; j < count; ++j) {
    const float* key = keys + static_cast<size_t>(j) * stride;
    for (int r = 0; r < ROWS; ++r) {
      float acc = 0.0f;
      for (int d = 0; d < head_dim; ++d)
        acc = std::fma(q[r][d], key[d], acc);
      scores[r][p + j] = acc * scale;
    }
  }
}

// Eight keys' element from a column: float32 as stored, or bfloat16 widened exactly.
inline __m256 load_8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load_8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The same scores from keys stored by column (kv_storage.hpp): column d of the run at
// `columns + d * column_stride` holds element d of `count` consecutive keys, so sixteen (or
// eight) positions take one broadcast and one fused multiply-add per row and element, with no
// transposing. Every score is score_tile's chain: +0, then fma(q[d], key[d]) for d in order, then
// times scale. scores[r] is indexed by position; the run starts at position p.
template <int ROWS, class T>
void score_columns(const float* const* q, const T* columns, size_t column_stride, int head_dim,
                   float scale, float* const* scores, int p, int count) {
  static_assert(ROWS >= 1 && ROWS <= block_rows, "one register block of rows");
  const __m256 s = _mm256_set1_ps(scale);
  const row_pointers<ROWS> rows(q);
  int j = 0;
  for (; j + 16 <= count; j += 16) {
    tile_acc c;
    for_acc_rows<ROWS>(c, [](int, __m256& lo, __m256& hi) { lo = hi = _mm256_setzero_ps(); });
    const T* k = columns + j;
    for (int d = 0; d < head_dim; ++d, k += column_stride) {
      fma_rows<ROWS>(c, load_8(k), load_8(k + 8), [&](int r) { return rows.broadcast(r, d); });
    }
    for_acc_rows<ROWS>(c, [&](int r, __m256& lo, __m256& hi) {
      _mm256_storeu_ps(scores[r] + p + j, _mm256_mul_ps(lo, s));
      _mm256_storeu_ps(scores[r] + p + j + 8, _mm256_mul_ps(hi, s));
    });
  }
  for (; j + 8 <= count; j += 8) {
    __m256 acc[ROWS];
    for (int r = 0; r < ROWS; ++r)
      acc[r] = _mm256_setzero_ps();
    const T* k = columns + j;
    for (int d = 0; d < head_dim; ++d, k += column_stride) {
      const __m256 column = load_8(k);
      for (int r = 0; r < ROWS; ++r)
        acc[r] = _mm256_fmadd_ps(rows.broadcast(r, d), column, acc[r]);
    }
    for (int r = 0; r < ROWS; ++r)
      _mm256_storeu_ps(scores[r] + p + j, _mm256_mul_ps(acc[r], s));
  }
  for (; j < count; ++j) {
    for (int r = 0; r < ROWS; ++r) {
      float acc = 0.0f;
      for (int d = 0; d < head_dim; ++d)
        acc = std::fma(q[r][d], to_float(columns[static_cast<size_t>(d) * column_stride + j]), acc);
      scores[r][p + j] = acc * scale;
    }
  }
}

// The value rows of one chunk: row(p) is position p's, for p in [base, base + chunk_positions).
// They are read where the KV storage holds them (float32), or from a widened copy (bfloat16).
struct value_rows {
  const float* at[chunk_positions];
  int base = 0;
  const float* row(int p) const { return at[p - base]; }
};

// out[r][d0 .. d0 + 16) += w[r][p] * value(p)[d0 ..] for p in [b, e), in order, for ROWS rows
// that all cover [b, e). `w[r]` is indexed by position.
template <int ROWS>
void weigh_values(const value_rows& values, const float* const* w, float* const* out, int d0, int b,
                  int e) {
  tile_acc c;
  for_acc_rows<ROWS>(c, [&](int r, __m256& lo, __m256& hi) {
    lo = _mm256_loadu_ps(out[r] + d0);
    hi = _mm256_loadu_ps(out[r] + d0 + 8);
  });
  const row_pointers<ROWS> rows(w);
  for (int p = b; p < e; ++p) {
    const float* v = values.row(p) + d0;
    fma_rows<ROWS>(c, _mm256_loadu_ps(v), _mm256_loadu_ps(v + 8),
                   [&](int r) { return rows.broadcast(r, p); });
  }
  for_acc_rows<ROWS>(c, [&](int r, __m256& lo, __m256& hi) {
    _mm256_storeu_ps(out[r] + d0, lo);
    _mm256_storeu_ps(out[r] + d0 + 8, hi);
  });
}

// Four vectors (32 columns) of accumulators for each of up to three rows, as named variables:
// held in an array, GCC stored all twelve to the stack after every position's products.
struct wide_acc {
  __m256 a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3;
};

// Calls f(r, x0, x1, x2, x3) with each of the ROWS rows' four accumulators.
template <int ROWS, class Fn>
inline __attribute__((always_inline)) void for_wide_rows(wide_acc& c, Fn&& f) {
  f(0, c.a0, c.a1, c.a2, c.a3);
  if constexpr (ROWS > 1) f(1, c.b0, c.b1, c.b2, c.b3);
  if constexpr (ROWS > 2) f(2, c.c0, c.c1, c.c2, c.c3);
}

// The same sums over 32 columns for at most three rows (a decode tile): four accumulators a row,
// so each position's weights are broadcast once for 32 columns instead of twice.
template <int ROWS>
void weigh_values_32(const value_rows& values, const float* const* w, float* const* out, int d0,
                     int b, int e) {
  static_assert(ROWS >= 1 && ROWS <= 3, "twelve accumulators at most");
  wide_acc c;
  for_wide_rows<ROWS>(c, [&](int r, __m256& x0, __m256& x1, __m256& x2, __m256& x3) {
    x0 = _mm256_loadu_ps(out[r] + d0);
    x1 = _mm256_loadu_ps(out[r] + d0 + 8);
    x2 = _mm256_loadu_ps(out[r] + d0 + 16);
    x3 = _mm256_loadu_ps(out[r] + d0 + 24);
  });
  for (int p = b; p < e; ++p) {
    const float* v = values.row(p) + d0;
    const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
    const __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
    for_wide_rows<ROWS>(c, [&](int r, __m256& x0, __m256& x1, __m256& x2, __m256& x3) {
      const __m256 x = _mm256_broadcast_ss(w[r] + p);
      x0 = _mm256_fmadd_ps(x, v0, x0);
      x1 = _mm256_fmadd_ps(x, v1, x1);
      x2 = _mm256_fmadd_ps(x, v2, x2);
      x3 = _mm256_fmadd_ps(x, v3, x3);
    });
  }
  for_wide_rows<ROWS>(c, [&](int r, __m256& x0, __m256& x1, __m256& x2, __m256& x3) {
    _mm256_storeu_ps(out[r] + d0, x0);
    _mm256_storeu_ps(out[r] + d0 + 8, x1);
    _mm256_storeu_ps(out[r] + d0 + 16, x2);
    _mm256_storeu_ps(out[r] + d0 + 24, x3);
  });
}

// The same sums for one row over any column range: exactly the operations weigh_values does
// for that row (a fused multiply-add per element, positions in order).
void weigh_values_row(const value_rows& values, const float* w, float* out, int d0, int d1, int b,
                      int e) {
  for (int p = b; p < e; ++p) {
    const float* v = values.row(p);
    for (int d = d0; d < d1; ++d)
      out[d] = std::fma(w[p], v[d], out[d]);
  }
}

// The online softmax's step for one row and one chunk: scores s[b, e) become exp(s - m) for the
// running maximum m, and the row's running sum and output are rescaled to that maximum. The
// chunks are aligned to absolute positions, so a row meets the same chunks, and does the same
// operations, whatever tile or batch it is in.
void softmax_chunk(float* sc, int b, int e, float& max, float& sum, float* out, int head_dim) {
  float top = max;
  int j = b;
  if (e - b >= 8) {
    __m256 m8 = _mm256_loadu_ps(sc + j);
    for (j += 8; j + 8 <= e; j += 8)
      m8 = _mm256_max_ps(m8, _mm256_loadu_ps(sc + j));
    float lanes[8];
    _mm256_storeu_ps(lanes, m8);
    for (float l : lanes)
      top = std::max(top, l);
  }
  for (; j < e; ++j)
    top = std::max(top, sc[j]);
  if (top > max) {
    const float rescale = std::exp(max - top);  // 0 for the first chunk (max = -inf)
    sum *= rescale;
    for (int d = 0; d < head_dim; ++d)
      out[d] *= rescale;
    max = top;
  }
  const __m256 m8 = _mm256_set1_ps(max);
  __m256 lanes = _mm256_setzero_ps();
  for (j = b; j + 8 <= e; j += 8) {
    const __m256 x = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), m8));
    _mm256_storeu_ps(sc + j, x);
    lanes = _mm256_add_ps(lanes, x);
  }
  float chunk_sum = horizontal_sum(lanes);
  for (; j < e; ++j) {
    sc[j] = std::exp(sc[j] - max);
    chunk_sum += sc[j];
  }
  sum += chunk_sum;
}

// A tile: up to `tokens` consecutive tokens of one sequence, with every query head of one KV
// head: rows r = token * group + head within the group.
struct tile_job {
  int t0 = 0;
  int n = 0;
  int kv_head = 0;
};

// Tiles in the order that keeps one KV head's keys and values of one sequence in cache: per
// sequence, per KV head, its tokens in runs of `tokens`.
std::vector<tile_job> make_tiles(const attention_batch& batch, int kv_heads, int tokens) {
  std::vector<tile_job> tiles;
  for (int t = 0; t < batch.tokens;) {
    int end = t;
    while (end < batch.tokens && batch.token_seq[end] == batch.token_seq[t])
      ++end;
    for (int g = 0; g < kv_heads; ++g) {
      for (int t0 = t; t0 < end; t0 += tokens)
        tiles.push_back({t0, std::min(tokens, end - t0), g});
    }
    t = end;
  }
  return tiles;
}

// Per-thread buffers for one chunk: scores [rows][chunk positions], the chunk's keys transposed,
// its value rows (and their widened copies, for bfloat16), and eight bfloat16 keys widened.
struct attention_scratch {
  std::vector<float> scores, keys, values, widened;
  value_rows vrows;
};

template <class Fn>
void for_row_blocks(int rows, Fn&& fn) {
  int r = 0;
  for (; r + block_rows <= rows; r += block_rows)
    fn(r, std::integral_constant<int, block_rows>{});
  switch (rows - r) {
    case 5:
      return fn(r, std::integral_constant<int, 5>{});
    case 4:
      return fn(r, std::integral_constant<int, 4>{});
    case 3:
      return fn(r, std::integral_constant<int, 3>{});
    case 2:
      return fn(r, std::integral_constant<int, 2>{});
    case 1:
      return fn(r, std::integral_constant<int, 1>{});
    default:
      return;
  }
}

struct tile_rows {
  int count = 0;
  std::vector<int> first, len;
  std::vector<float> max, sum;  // the online softmax's running maximum and sum per row
  std::vector<const float*> q;
  std::vector<float*> scores, out;
  int lo = 0, hi = 0;
};

// out rows of a tile: sums over [b0, e0) of the chunk whose value rows are `vals`
// (indexed by position - base). Rows whose range covers the block's common part go through
// weigh_values; what only some rows cover runs row by row, before and after, so that every row
// still adds its positions in order.
void weigh_chunk(tile_rows& t, const value_rows& vals, int b0, int e0, int head_dim) {
  const int d_vec = head_dim / 16 * 16;
  for_row_blocks(t.count, [&](int r0, auto rows_c) {
    constexpr int ROWS = decltype(rows_c)::value;
    int cb = e0, ce = b0;  // common range of the block's rows within the chunk
    int lo = e0, hi = b0;
    for (int r = r0; r < r0 + ROWS; ++r) {
      const int b = std::max(b0, t.first[static_cast<size_t>(r)]);
      const int e = std::min(e0, t.len[static_cast<size_t>(r)]);
      if (r == r0) {
        cb = b;
        ce = e;
      } else {
        cb = std::max(cb, b);
        ce = std::min(ce, e);
      }
      lo = std::min(lo, b);
      hi = std::max(hi, e);
    }
    if (lo >= hi) return;
    if (cb >= ce) cb = ce = hi;  // no common part: every position row by row
    for (int r = r0; r < r0 + ROWS; ++r) {
      const int b = std::max(b0, t.first[static_cast<size_t>(r)]);
      const int e = std::min(cb, std::min(e0, t.len[static_cast<size_t>(r)]));
      if (b < e) {
        weigh_values_row(vals, t.scores[static_cast<size_t>(r)], t.out[static_cast<size_t>(r)], 0,
                         head_dim, b, e);
      }
    }
    if (cb < ce) {
      int d0 = 0;
      if constexpr (ROWS <= 3) {
        for (; d0 + 32 <= d_vec; d0 += 32)
          weigh_values_32<ROWS>(vals, t.scores.data() + r0, t.out.data() + r0, d0, cb, ce);
      }
      for (; d0 < d_vec; d0 += 16) {
        weigh_values<ROWS>(vals, t.scores.data() + r0, t.out.data() + r0, d0, cb, ce);
      }
      for (int r = r0; r < r0 + ROWS && d_vec < head_dim; ++r) {
        weigh_values_row(vals, t.scores[static_cast<size_t>(r)], t.out[static_cast<size_t>(r)],
                         d_vec, head_dim, cb, ce);
      }
    }
    for (int r = r0; r < r0 + ROWS; ++r) {
      const int e = std::min(e0, t.len[static_cast<size_t>(r)]);
      const int from = std::max(ce, std::max(b0, t.first[static_cast<size_t>(r)]));
      if (from < e) {
        weigh_values_row(vals, t.scores[static_cast<size_t>(r)], t.out[static_cast<size_t>(r)], 0,
                         head_dim, from, e);
      }
    }
  });
}

// Scores over [b, e) for a tile of at most block_rows rows, from the keys where the storage holds
// them (bfloat16 keys widened eight rows at a time first).
template <class T>
void score_keys_in_place(const cpu_kv_storage& kv, int layer, const int32_t* table,
                         int block_tokens, int b, int e, size_t stride, size_t offset, int head_dim,
                         float scale, attention_scratch& scratch, tile_rows& t) {
  for_row_blocks(t.count, [&](int, auto rows_c) {
    constexpr int ROWS = decltype(rows_c)::value;
    for_each_run<T>(kv, true, layer, table, block_tokens, b, e, [&](int p, const T* rows, int n) {
      if constexpr (std::is_same_v<T, float>) {
        score_run<ROWS>(t.q.data(), rows + offset, stride, head_dim, scale, t.scores.data(), p, n);
      } else {
        float* widened = scratch.widened.data();
        for (int j = 0; j < n; j += 8) {
          const int m = std::min(8, n - j);
          for (int i = 0; i < m; ++i) {
            copy_row(rows + static_cast<size_t>(j + i) * stride + offset, head_dim,
                     widened + static_cast<size_t>(i) * head_dim);
          }
          score_run<ROWS>(t.q.data(), widened, static_cast<size_t>(head_dim), head_dim, scale,
                          t.scores.data(), p + j, m);
        }
      }
    });
  });
}

// Sixteen positions of keys stored by column: column d at `keys + d * column stride`, the first
// position's score going to scores[r][p].
template <class T>
struct key_piece {
  int p = 0;
  const T* keys = nullptr;
  int count = 0;  ///< 16, or fewer at the end of a block's run
};

// score_columns over K whole pieces side by side, for ROWS rows. One piece gives a decode tile
// (two rows) four accumulator chains, and each of them waits on the previous element's fused
// multiply-add: four chains of four cycles' latency fill only one of the two FMA ports. K pieces
// give 4K chains, the same operations on each: every score is still score_columns' chain.
template <int ROWS, int K, class T>
void score_pieces(const float* const* q, const key_piece<T>* pieces, size_t column_stride,
                  int head_dim, float scale, float* const* scores) {
  static_assert(ROWS * K <= 4, "eight to sixteen accumulators at most");
  __m256 acc[K][ROWS][2];
  for (int k = 0; k < K; ++k) {
    for (int r = 0; r < ROWS; ++r)
      acc[k][r][0] = acc[k][r][1] = _mm256_setzero_ps();
  }
  const row_pointers<ROWS> rows(q);
  for (int d = 0; d < head_dim; ++d) {
    const size_t at = static_cast<size_t>(d) * column_stride;
    __m256 x[ROWS];
    for (int r = 0; r < ROWS; ++r)
      x[r] = rows.broadcast(r, d);
    for (int k = 0; k < K; ++k) {
      const __m256 lo = load_8(pieces[k].keys + at), hi = load_8(pieces[k].keys + at + 8);
      for (int r = 0; r < ROWS; ++r) {
        acc[k][r][0] = _mm256_fmadd_ps(x[r], lo, acc[k][r][0]);
        acc[k][r][1] = _mm256_fmadd_ps(x[r], hi, acc[k][r][1]);
      }
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (int k = 0; k < K; ++k) {
    for (int r = 0; r < ROWS; ++r) {
      _mm256_storeu_ps(scores[r] + pieces[k].p, _mm256_mul_ps(acc[k][r][0], s));
      _mm256_storeu_ps(scores[r] + pieces[k].p + 8, _mm256_mul_ps(acc[k][r][1], s));
    }
  }
}

// Scores over [b, e) for every row of a tile from keys stored by column, block of rows by block
// of rows (the chunk's keys stay in L1 between them). Few rows score several whole pieces side by
// side (score_pieces); the rest, and pieces shorter than sixteen, go through score_columns.
template <class T>
void score_key_columns(const cpu_kv_storage& kv, int layer, const int32_t* table, int block_tokens,
                       int b, int e, int kv_head, int head_dim, float scale, tile_rows& t) {
  const size_t column_stride = static_cast<size_t>(block_tokens);
  const size_t head_offset =
      static_cast<size_t>(kv_head) * static_cast<size_t>(head_dim) * column_stride;
  key_piece<T> pieces[chunk_positions];
  int n = 0;
  for_each_run<T>(kv, true, layer, table, block_tokens, b, e, [&](int p, const T* keys, int count) {
    for (int j = 0; j < count; j += 16)
      pieces[n++] = {p + j, keys + head_offset + j, std::min(16, count - j)};
  });
  for_row_blocks(t.count, [&](int r0, auto rows_c) {
    constexpr int ROWS = decltype(rows_c)::value;
    const float* const* q = t.q.data() + r0;
    float* const* scores = t.scores.data() + r0;
    int i = 0;
    if constexpr (ROWS <= 2) {
      constexpr int K = 4 / ROWS;
      for (; i + K <= n; i += K) {
        bool whole = true;
        for (int k = 0; k < K; ++k)
          whole = whole && pieces[i + k].count == 16;
        if (!whole) break;
        score_pieces<ROWS, K>(q, pieces + i, column_stride, head_dim, scale, scores);
      }
    }
    for (; i < n; ++i) {
      score_columns<ROWS>(q, pieces[i].keys, column_stride, head_dim, scale, scores, pieces[i].p,
                          pieces[i].count);
    }
  });
}

// One tile: tokens [t0, t0 + n), every query head of one KV head, chunk by chunk of positions:
// the chunk's keys transposed once for all rows (they stay in L1), its value rows located, scores,
// the online softmax step, then the weighted values. T is the storage's element type.
template <class T>
void attend_tile(const cpu_kv_storage& kv, int layer, const attention_batch& batch,
                 const tile_job& tile, float scale, attention_scratch& scratch, tile_rows& t) {
  const kv_layout& lay = kv.layout();
  const int head_dim = lay.head_dim;
  const size_t stride = static_cast<size_t>(lay.kv_heads) * static_cast<size_t>(head_dim);
  const size_t offset = static_cast<size_t>(tile.kv_head) * static_cast<size_t>(head_dim);
  const int32_t* table = batch.block_ids + batch.block_offsets[batch.token_seq[tile.t0]];
  for (int cs = t.lo / chunk_positions * chunk_positions; cs < t.hi; cs += chunk_positions) {
    const int b0 = std::max(cs, t.lo), e0 = std::min(cs + chunk_positions, t.hi);
    const bool by_column = kv.keys_by_column();
    if (!by_column && t.count > block_rows) {
      transpose_keys<T>(kv, layer, table, lay.block_tokens, b0, e0, cs, stride, offset, head_dim,
                        scratch.keys.data(), scratch.widened.data());
    }
    scratch.vrows.base = cs;
    for_each_run<T>(
        kv, false, layer, table, lay.block_tokens, b0, e0, [&](int p, const T* rows, int n) {
          for (int r = 0; r < n; ++r) {
            const T* row = rows + static_cast<size_t>(r) * stride + offset;
            if constexpr (std::is_same_v<T, float>) {
              scratch.vrows.at[p + r - cs] = row;
            } else {
              float* widened = scratch.values.data() + static_cast<size_t>(p + r - cs) * head_dim;
              copy_row(row, head_dim, widened);
              scratch.vrows.at[p + r - cs] = widened;
            }
          }
        });
    for (int r = 0; r < t.count; ++r) {
      t.scores[static_cast<size_t>(r)] =
          scratch.scores.data() + static_cast<ptrdiff_t>(r) * chunk_positions - cs;
    }
    if (by_column) {
      score_key_columns<T>(kv, layer, table, lay.block_tokens, b0, e0, tile.kv_head, head_dim,
                           scale, t);
    } else if (t.count <= block_rows) {
      score_keys_in_place<T>(kv, layer, table, lay.block_tokens, b0, e0, stride, offset, head_dim,
                             scale, scratch, t);
    } else {
      const int c0 = (b0 - cs) / 16 * 16, c1 = (e0 - cs + 15) / 16 * 16;
      for_row_blocks(t.count, [&](int r0, auto rows_c) {
        constexpr int ROWS = decltype(rows_c)::value;
        float* rows_scores[ROWS];
        for (int r = 0; r < ROWS; ++r)
          rows_scores[r] = t.scores[static_cast<size_t>(r0 + r)] + cs;
        score_rows<ROWS>(t.q.data() + r0, scratch.keys.data(), head_dim, scale, rows_scores, c0,
                         c1);
      });
    }
    for (int r = 0; r < t.count; ++r) {
      const size_t i = static_cast<size_t>(r);
      const int b = std::max(b0, t.first[i]), e = std::min(e0, t.len[i]);
      if (b < e) softmax_chunk(t.scores[i], b, e, t.max[i], t.sum[i], t.out[i], head_dim);
    }
    weigh_chunk(t, scratch.vrows, b0, e0, head_dim);
  }
  for (int r = 0; r < t.count; ++r) {
    const size_t i = static_cast<size_t>(r);
    const float inv = 1.0f / t.sum[i];
    for (int d = 0; d < head_dim; ++d)
      t.out[i][d] *= inv;
  }
}

// Tiles a thread takes at a time: enough for the matmuls' item of work (item_multiply_adds, a
// score and a weighted value per row and position reached). A decode step over a short context
// is a few microseconds of attention in all, about what handing half of it to the other core
// costs: the draft model's (2 KV heads, 2 rows each over about 100 positions) took 2.7 us a
// layer split in two.
size_t tiles_per_item(const std::vector<tile_job>& tiles, const attention_batch& batch, int group,
                      int head_dim, int window) {
  double work = 0.0;
  for (const tile_job& t : tiles) {
    int positions = batch.positions[t.t0 + t.n - 1] + 1;
    if (window > 0) positions = std::min(positions, window);
    work += static_cast<double>(t.n) * group * positions * head_dim * 2.0;
  }
  if (tiles.empty() || work <= 0.0) return 1;
  const double per_tile = work / static_cast<double>(tiles.size());
  return static_cast<size_t>(std::max(1.0, std::ceil(item_multiply_adds() / per_tile)));
}

}  // namespace

void attention(const tensor& q, const cpu_kv_storage& kv, int layer, const attention_batch& batch,
               int heads, float scale, int window, const tensor& out, thread_pool& pool) {
  const kv_layout& lay = kv.layout();
  const int head_dim = lay.head_dim;
  const int group = heads / lay.kv_heads;
  // About 32 rows per tile: each chunk of keys and values serves that many rows from L1.
  const int tile_tokens = std::max(1, std::min(16, 32 / group));
  const std::vector<tile_job> tiles = make_tiles(batch, lay.kv_heads, tile_tokens);
  const size_t grain = tiles_per_item(tiles, batch, group, head_dim, window);
  pool.parallel_for(tiles.size(), grain, [&](size_t begin, size_t end) {
    thread_local attention_scratch scratch;
    thread_local tile_rows t;
    const size_t chunk_floats = static_cast<size_t>(head_dim) * chunk_positions;
    scratch.keys.resize(chunk_floats);
    scratch.values.resize(chunk_floats);
    scratch.widened.resize(static_cast<size_t>(head_dim) * 8);
    for (size_t item = begin; item < end; ++item) {
      const tile_job& tile = tiles[item];
      t.count = tile.n * group;
      const size_t rows = static_cast<size_t>(t.count);
      t.first.resize(rows);
      t.len.resize(rows);
      t.max.assign(rows, -INFINITY);
      t.sum.assign(rows, 0.0f);
      t.q.resize(rows);
      t.scores.resize(rows);
      t.out.resize(rows);
      scratch.scores.resize(rows * chunk_positions);
      t.lo = INT32_MAX;
      t.hi = 0;
      for (int r = 0; r < t.count; ++r) {
        const int token = tile.t0 + r / group;
        const int h = tile.kv_head * group + r % group;
        const size_t i = static_cast<size_t>(r);
        t.len[i] = batch.positions[token] + 1;
        t.first[i] = window > 0 ? std::max(0, t.len[i] - window) : 0;
        t.q[i] = q.row(token) + static_cast<ptrdiff_t>(h) * head_dim;
        t.out[i] = out.row(token) + static_cast<ptrdiff_t>(h) * head_dim;
        std::fill(t.out[i], t.out[i] + head_dim, 0.0f);
        t.lo = std::min(t.lo, t.first[i]);
        t.hi = std::max(t.hi, t.len[i]);
      }
      if (kv.is_bf16()) {
        attend_tile<uint16_t>(kv, layer, batch, tile, scale, scratch, t);
      } else {
        attend_tile<float>(kv, layer, batch, tile, scale, scratch, t);
      }
    }
  });
}

}  // namespace brigade::gpu::cpu

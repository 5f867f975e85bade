// The CPU attention scores a tile of a few query rows (a decode token's heads of one KV head) and
// a larger tile (a prefill chunk, a verify step) with different register blocks; where keys are
// stored by row (values aliasing keys), the larger tile goes through a transposed copy of each
// chunk of keys, and where they are stored by column, each run of a block's keys goes sixteen,
// eight and one position at a time. Every way must give a row the same bits, or a token would
// attend differently decoded than prefilled or verified, and neither speculation nor the prefix
// cache could promise plain decoding's output.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/dtype.hpp"
#include "paged_batch.hpp"

using namespace brigade::gpu;
using brigade::gpu::test::make_tables;
using brigade::gpu::test::paged_step;
using brigade::gpu::test::random_floats;
using brigade::gpu::test::token_range;

namespace {

struct case_shape {
  dtype element;
  int kv_heads, heads, head_dim, window;
};

}  // namespace

TEST_CASE("a token attends with the same bits in a decode tile and in a chunk's tile",
          "[attention]") {
  auto dev = make_cpu_backend();
  const int length = 150, chunk = 40;  // the chunk: positions [110, 150)
  // Blocks of 12 and 28 tokens: runs of keys that are not whole groups of eight or sixteen.
  for (const int block_tokens : {12, 28}) {
    for (const case_shape c :
         {case_shape{dtype::f32, 2, 4, 40, 0}, case_shape{dtype::f32, 1, 6, 36, 0},
          case_shape{dtype::f32, 4, 4, 64, 0}, case_shape{dtype::bf16, 2, 8, 20, 0},
          case_shape{dtype::bf16, 2, 4, 32, 0}, case_shape{dtype::f32, 2, 4, 40, 37},
          case_shape{dtype::f32, 3, 15, 24, 0}}) {
      INFO(block_tokens << " tokens a block, kv " << dtype_name(c.element) << ", " << c.kv_heads
                        << " KV heads, " << c.heads << " heads of " << c.head_dim << ", window "
                        << c.window);
      kv_layout l;
      l.layers = 1;
      l.blocks = 16;
      l.block_tokens = block_tokens;
      l.kv_heads = c.kv_heads;
      l.head_dim = c.head_dim;
      l.element = c.element;
      auto kv = dev->make_kv(l);
      std::mt19937 rng(c.head_dim);
      const auto tables = make_tables({length}, block_tokens, l.blocks, &rng);
      const int row = c.kv_heads * c.head_dim, width = c.heads * c.head_dim;
      auto keys = random_floats(static_cast<size_t>(length) * row, 1);
      auto values = random_floats(static_cast<size_t>(length) * row, 2);
      const paged_step fill = paged_step::make(tables, {{0, 0, length}});
      dev->kv_write(*kv, 0, tensor{keys.data(), length, row, row},
                    tensor{values.data(), length, row, row}, fill.view());

      auto queries = random_floats(static_cast<size_t>(chunk) * width, 3);
      auto attend = [&](token_range r, float* q) {
        const paged_step step = paged_step::make(tables, {r});
        std::vector<float> out(static_cast<size_t>(r.count) * width);
        dev->attention(tensor{q, r.count, width, width}, *kv, 0, step.view(), c.heads, 0.125f,
                       c.window, tensor{out.data(), r.count, width, width});
        return out;
      };
      const auto together = attend({0, length - chunk, chunk}, queries.data());
      int differing = 0;
      for (int t = 0; t < chunk; ++t) {
        float* q = queries.data() + static_cast<ptrdiff_t>(t) * width;
        const auto alone = attend({0, length - chunk + t, 1}, q);
        if (!std::equal(alone.begin(), alone.end(),
                        together.begin() + static_cast<ptrdiff_t>(t) * width)) {
          ++differing;
        }
      }
      CHECK(differing == 0);
    }
  }
}

namespace {

// Attention of one query row as the formula says, in double precision: softmax over positions
// [first, pos] of q . key[p] * scale, then the values weighed by it. keys and values are rows of
// kv_heads * head_dim floats per position.
std::vector<double> reference_row(const float* q, const std::vector<float>& keys,
                                  const std::vector<float>& values, int kv_heads, int heads,
                                  int head_dim, int pos, int window, float scale) {
  const int group = heads / kv_heads, row = kv_heads * head_dim;
  const int first = window > 0 ? std::max(0, pos + 1 - window) : 0;
  std::vector<double> out(static_cast<size_t>(heads) * head_dim, 0.0);
  for (int h = 0; h < heads; ++h) {
    const size_t kv = static_cast<size_t>(h / group) * head_dim;
    std::vector<double> w;
    double top = -1e300, sum = 0;
    for (int p = first; p <= pos; ++p) {
      double dot = 0;
      for (int d = 0; d < head_dim; ++d)
        dot += static_cast<double>(q[h * head_dim + d]) * keys[p * row + kv + d];
      w.push_back(dot * scale);
      top = std::max(top, w.back());
    }
    for (double& x : w)
      sum += x = std::exp(x - top);
    for (int p = first; p <= pos; ++p) {
      for (int d = 0; d < head_dim; ++d)
        out[h * head_dim + d] += w[p - first] / sum * values[p * row + kv + d];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("attention equals the formula in double precision for any block size and KV type",
          "[attention]") {
  // Keys by column go sixteen, eight and one position at a time within a block's run; blocks of
  // 1, 4, 12, 16 and 28 tokens take every mix of them, decoding (a row alone) and prefilling (a
  // tile of many rows), f32 and bf16 keys, with and without a window.
  auto dev = make_cpu_backend();
  const int length = 97;
  for (const int block_tokens : {1, 4, 12, 16, 28}) {
    for (const case_shape c :
         {case_shape{dtype::f32, 2, 4, 40, 0}, case_shape{dtype::bf16, 2, 4, 32, 0},
          case_shape{dtype::f32, 1, 6, 36, 21}, case_shape{dtype::bf16, 3, 6, 20, 0}}) {
      INFO(block_tokens << " tokens a block, kv " << dtype_name(c.element) << ", " << c.kv_heads
                        << " KV heads, " << c.heads << " heads of " << c.head_dim << ", window "
                        << c.window);
      kv_layout l;
      l.layers = 1;
      l.blocks = (length + block_tokens - 1) / block_tokens + 3;
      l.block_tokens = block_tokens;
      l.kv_heads = c.kv_heads;
      l.head_dim = c.head_dim;
      l.element = c.element;
      auto kv = dev->make_kv(l);
      std::mt19937 rng(static_cast<unsigned>(block_tokens * 100 + c.head_dim));
      const auto tables = make_tables({length}, block_tokens, l.blocks, &rng);
      const int row = c.kv_heads * c.head_dim, width = c.heads * c.head_dim;
      auto keys = random_floats(static_cast<size_t>(length) * row, 4);
      auto values = random_floats(static_cast<size_t>(length) * row, 5);
      auto queries = random_floats(static_cast<size_t>(length) * width, 6);
      // What the storage holds, and so what the formula attends over.
      if (c.element == dtype::bf16) {
        for (float& x : keys)
          x = bf16_to_f32(f32_to_bf16(x));
        for (float& x : values)
          x = bf16_to_f32(f32_to_bf16(x));
      }
      const float scale = 0.3f;
      // The first 60 positions prefilled as one tile; the rest decoded one at a time.
      std::vector<float> out(static_cast<size_t>(length) * width);
      auto attend = [&](int start, int count) {
        const paged_step step = paged_step::make(tables, {{0, start, count}});
        const size_t at = static_cast<size_t>(start) * row;
        dev->kv_write(*kv, 0, tensor{keys.data() + at, count, row, row},
                      tensor{values.data() + at, count, row, row}, step.view());
        const size_t q_at = static_cast<size_t>(start) * width;
        dev->attention(tensor{queries.data() + q_at, count, width, width}, *kv, 0, step.view(),
                       c.heads, scale, c.window, tensor{out.data() + q_at, count, width, width});
      };
      attend(0, 60);
      for (int p = 60; p < length; ++p)
        attend(p, 1);
      double worst = 0;
      for (int p = 0; p < length; ++p) {
        const auto want =
            reference_row(queries.data() + static_cast<size_t>(p) * width, keys, values, c.kv_heads,
                          c.heads, c.head_dim, p, c.window, scale);
        for (int i = 0; i < width; ++i) {
          worst = std::max(worst, std::abs(want[static_cast<size_t>(i)] -
                                           out[static_cast<size_t>(p) * width + i]));
        }
      }
      CHECK(worst < 2e-6);
    }
  }
}

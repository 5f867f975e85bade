// The CPU attention computes a tile of a few query rows (a decode token's heads of one KV head)
// straight from the stored keys, and a larger tile (a prefill chunk, a verify step) through a
// transposed copy of each chunk of keys. Both must give a row the same bits, or a token would
// attend differently decoded than prefilled or verified, and neither speculation nor the prefix
// cache could promise plain decoding's output.
#include <catch2/catch.hpp>
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

// Twelve tokens a block: runs of keys that are not whole groups of eight.
constexpr int block_tokens = 12;

struct case_shape {
  dtype element;
  int kv_heads, heads, head_dim, window;
};

}  // namespace

TEST_CASE("a token attends with the same bits in a decode tile and in a chunk's tile",
          "[attention]") {
  auto dev = make_cpu_backend();
  const int length = 150, chunk = 40;  // the chunk: positions [110, 150)
  for (const case_shape c :
       {case_shape{dtype::f32, 2, 4, 40, 0}, case_shape{dtype::f32, 1, 6, 36, 0},
        case_shape{dtype::f32, 4, 4, 64, 0}, case_shape{dtype::bf16, 2, 8, 20, 0},
        case_shape{dtype::bf16, 2, 4, 32, 0}, case_shape{dtype::f32, 2, 4, 40, 37},
        case_shape{dtype::f32, 3, 15, 24, 0}}) {
    INFO("kv " << dtype_name(c.element) << ", " << c.kv_heads << " KV heads, " << c.heads
               << " heads of " << c.head_dim << ", window " << c.window);
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

// A bf16 KV storage: half the bytes, rows rounded to nearest even as they are written and widened
// exactly as they are read, so attention over it equals, bit for bit, attention over an f32
// storage holding the rounded rows, and stays within a stated bound of attention over the exact
// rows. Each row's result is the same whatever batch it is in.
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

namespace {

constexpr int block_tokens = 8;
constexpr int blocks = 48;

kv_layout layout_of(dtype element, int kv_heads, int head_dim, bool alias = false) {
  kv_layout l;
  l.layers = 2;
  l.blocks = blocks;
  l.block_tokens = block_tokens;
  l.kv_heads = kv_heads;
  l.head_dim = head_dim;
  l.values_alias_keys = alias;
  l.element = element;
  return l;
}

std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}

// KV of sequences of `lengths` (random rows, the same for every storage) in `kv`, layer 0.
struct filled {
  std::vector<std::vector<int32_t>> tables;
  std::vector<int> lengths;
};

void fill(backend& dev, kv_storage& kv, const filled& f, const std::vector<float>& keys,
          const std::vector<float>& values) {
  const int row = kv.layout().kv_heads * kv.layout().head_dim;
  std::vector<brigade::gpu::test::token_range> ranges;
  int tokens = 0;
  for (size_t s = 0; s < f.lengths.size(); ++s) {
    ranges.push_back({static_cast<int>(s), 0, f.lengths[s]});
    tokens += f.lengths[s];
  }
  const paged_step step = paged_step::make(f.tables, ranges);
  const tensor k{const_cast<float*>(keys.data()), tokens, row, row};
  const tensor v{const_cast<float*>(values.data()), tokens, row, row};
  dev.kv_write(kv, 0, k, v, step.view());
}

// Attention of the last `count` positions of each sequence in `ranges`, as one step.
std::vector<float> attend(backend& dev, const kv_storage& kv, const filled& f,
                          const std::vector<brigade::gpu::test::token_range>& ranges, int heads,
                          const std::vector<float>& queries) {
  const paged_step step = paged_step::make(f.tables, ranges);
  const int tokens = static_cast<int>(step.positions.size());
  const int width = heads * kv.layout().head_dim;
  std::vector<float> out(static_cast<size_t>(tokens) * width);
  const tensor q{const_cast<float*>(queries.data()), tokens, width, width};
  dev.attention(q, kv, 0, step.view(), heads, 0.125f, 0, tensor{out.data(), tokens, width, width});
  return out;
}

}  // namespace

TEST_CASE("a bf16 KV storage takes half the bytes of an f32 one", "[kv][bf16]") {
  auto dev = make_cpu_backend();
  for (bool alias : {false, true}) {
    auto f32 = dev->make_kv(layout_of(dtype::f32, 2, 32, alias));
    auto bf16 = dev->make_kv(layout_of(dtype::bf16, 2, 32, alias));
    CHECK(bf16->bytes() * 2 == f32->bytes());
    CHECK(bf16->bytes() == sizeof(uint16_t) * (alias ? 1 : 2) * 2 * blocks * block_tokens * 64);
  }
  CHECK_THROWS(dev->make_kv(layout_of(dtype::f16, 2, 32)));
}

TEST_CASE("a bf16 KV storage rounds to nearest even and hands out exact floats", "[kv][bf16]") {
  auto dev = make_cpu_backend();
  const int row = 16;
  auto kv = dev->make_kv(layout_of(dtype::bf16, 1, row));
  // 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: even is 1. 1 + 3 * 2^-8 lies halfway
  // between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6. 1 + 2^-8 + 2^-20 is above half: up.
  std::vector<float> keys(static_cast<size_t>(block_tokens) * row, 0.0f);
  keys[0] = 1.0f + 0x1p-8f;
  keys[1] = 1.0f + 3 * 0x1p-8f;
  keys[2] = 1.0f + 0x1p-8f + 0x1p-20f;
  keys[3] = -(1.0f + 0x1p-8f);
  keys[4] = 3.0e-39f;  // a float32 subnormal
  std::vector<float> values = random_floats(keys.size(), 7);
  const paged_step s = paged_step::make({{4}}, {{0, 0, block_tokens}});
  const tensor k{keys.data(), block_tokens, row, row};
  const tensor v{values.data(), block_tokens, row, row};
  dev->kv_write(*kv, 1, k, v, s.view());
  std::vector<float> got_keys(keys.size()), got_values(keys.size());
  dev->read_kv_block(*kv, 1, 4, got_keys.data(), got_values.data());
  CHECK(got_keys[0] == 1.0f);
  CHECK(got_keys[1] == 1.0f + 0x1p-6f);
  CHECK(got_keys[2] == 1.0f + 0x1p-7f);
  CHECK(got_keys[3] == -1.0f);
  CHECK(got_keys == rounded(keys));
  CHECK(got_values == rounded(values));
  // What a bf16 storage hands out goes back in unchanged (hand-offs and prefix-cache tiers).
  auto other = dev->make_kv(layout_of(dtype::bf16, 1, row));
  dev->write_kv_block(*other, 0, 9, got_keys.data(), got_values.data());
  std::vector<float> back_keys(keys.size()), back_values(keys.size());
  dev->read_kv_block(*other, 0, 9, back_keys.data(), back_values.data());
  CHECK(back_keys == got_keys);
  CHECK(back_values == got_values);
}

TEST_CASE("attention over bf16 KV equals f32 attention over the rounded rows", "[kv][bf16]") {
  auto dev = make_cpu_backend();
  for (int head_dim : {64, 40, 24}) {
    CAPTURE(head_dim);
    const int kv_heads = 2, heads = 4;
    const int row = kv_heads * head_dim;
    std::mt19937 rng(11);
    filled f;
    f.lengths = {37, 70, 130};
    f.tables = make_tables(f.lengths, block_tokens, blocks, &rng);
    const size_t rows = 37 + 70 + 130;
    const auto keys = random_floats(rows * static_cast<size_t>(row), 1);
    const auto values = random_floats(rows * static_cast<size_t>(row), 2);
    auto bf16 = dev->make_kv(layout_of(dtype::bf16, kv_heads, head_dim));
    auto f32_rounded = dev->make_kv(layout_of(dtype::f32, kv_heads, head_dim));
    auto f32_exact = dev->make_kv(layout_of(dtype::f32, kv_heads, head_dim));
    fill(*dev, *bf16, f, keys, values);
    fill(*dev, *f32_rounded, f, rounded(keys), rounded(values));
    fill(*dev, *f32_exact, f, keys, values);
    // A prefill chunk of each sequence and a decode token, in one step.
    const std::vector<brigade::gpu::test::token_range> ranges{
        {0, 20, 17}, {1, 69, 1}, {2, 100, 30}};
    const auto queries = random_floats(48 * static_cast<size_t>(heads) * head_dim, 3);
    const auto a = attend(*dev, *bf16, f, ranges, heads, queries);
    const auto b = attend(*dev, *f32_rounded, f, ranges, heads, queries);
    const auto c = attend(*dev, *f32_exact, f, ranges, heads, queries);
    CHECK(a == b);
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, std::fabs(a[i] - c[i]));
    // Keys and values in [-1, 1] rounded to 8 significant bits (relative error 2^-9) move an
    // attention output, a convex combination of values, by a few 2^-9 at most.
    CHECK(worst < 8e-3f);
    CHECK(worst > 0.0f);
  }
}

TEST_CASE("attention over bf16 KV gives a row the same result in any batch", "[kv][bf16]") {
  auto dev = make_cpu_backend();
  const int kv_heads = 2, heads = 8, head_dim = 40;
  const int row = kv_heads * head_dim;
  const int width = heads * head_dim;
  std::mt19937 rng(21);
  filled f;
  f.lengths = {90, 33, 150, 7};
  f.tables = make_tables(f.lengths, block_tokens, blocks, &rng);
  const size_t rows = 90 + 33 + 150 + 7;
  auto kv = dev->make_kv(layout_of(dtype::bf16, kv_heads, head_dim));
  fill(*dev, *kv, f, random_floats(rows * row, 4), random_floats(rows * row, 5));
  // Each sequence's last token alone, then all four decode tokens and a prefill chunk together.
  const std::vector<brigade::gpu::test::token_range> together{
      {0, 89, 1}, {1, 32, 1}, {2, 120, 30}, {3, 6, 1}};
  const auto queries = random_floats(33 * static_cast<size_t>(width), 6);
  const auto all = attend(*dev, *kv, f, together, heads, queries);
  size_t at = 0;
  for (const auto& r : together) {
    const size_t n = static_cast<size_t>(r.count) * width;
    const std::vector<float> q(queries.begin() + static_cast<ptrdiff_t>(at),
                               queries.begin() + static_cast<ptrdiff_t>(at + n));
    const auto alone = attend(*dev, *kv, f, {r}, heads, q);
    CHECK(std::equal(alone.begin(), alone.end(), all.begin() + static_cast<ptrdiff_t>(at)));
    at += n;
  }
}

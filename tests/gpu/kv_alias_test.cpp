// A KV layout whose values alias its keys (MLA's one cached row per token) stores each row once,
// and attention over it equals attention over a two-plane cache holding the same rows as keys and
// as values, bit for bit.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "paged_batch.hpp"

using namespace brigade::gpu;
using brigade::gpu::test::make_tables;
using brigade::gpu::test::paged_step;
using brigade::gpu::test::random_floats;

namespace {

constexpr int block_tokens = 4;
constexpr int row = 24;  // one KV head of 24 (latent + rope key)
constexpr int blocks = 8;

kv_layout layout_of(bool alias) {
  kv_layout l;
  l.layers = 2;
  l.blocks = blocks;
  l.block_tokens = block_tokens;
  l.kv_heads = 1;
  l.head_dim = row;
  l.values_alias_keys = alias;
  return l;
}

}  // namespace

TEST_CASE("a KV layout whose values alias its keys stores rows once", "[kv][mla]") {
  auto dev = make_cpu_backend();
  auto once = dev->make_kv(layout_of(true));
  auto twice = dev->make_kv(layout_of(false));
  CHECK(layout_of(true).planes() == 1);
  CHECK(layout_of(false).planes() == 2);
  CHECK(once->bytes() * 2 == twice->bytes());
  CHECK(once->bytes() == sizeof(float) * 2 * blocks * block_tokens * row);
}

TEST_CASE("attention over aliased values equals attention over the same rows stored twice",
          "[kv][mla]") {
  auto dev = make_cpu_backend();
  auto once = dev->make_kv(layout_of(true));
  auto twice = dev->make_kv(layout_of(false));
  std::mt19937 rng(5);
  const std::vector<int> lengths{7, 13};
  const auto tables = make_tables(lengths, block_tokens, blocks, &rng);
  const paged_step prefill = paged_step::make(tables, {{0, 0, 7}, {1, 0, 13}});
  const int tokens = 20;
  auto rows = random_floats(static_cast<size_t>(tokens) * row, 1);
  const tensor k{rows.data(), tokens, row, row};
  for (int layer = 0; layer < 2; ++layer) {
    dev->kv_write(*once, layer, k, k, prefill.view());
    dev->kv_write(*twice, layer, k, k, prefill.view());
  }
  const int heads = 3;
  auto queries = random_floats(static_cast<size_t>(tokens) * heads * row, 2);
  const tensor q{queries.data(), tokens, heads * row, heads * row};
  std::vector<float> a(static_cast<size_t>(tokens) * heads * row);
  std::vector<float> b(a.size(), 1.0f);
  for (int layer = 0; layer < 2; ++layer) {
    dev->attention(q, *once, layer, prefill.view(), heads, 0.2f, 0,
                   tensor{a.data(), tokens, heads * row, heads * row});
    dev->attention(q, *twice, layer, prefill.view(), heads, 0.2f, 0,
                   tensor{b.data(), tokens, heads * row, heads * row});
    CHECK(a == b);
  }
}

TEST_CASE("aliased KV blocks copy out and in as keys only", "[kv][mla]") {
  auto dev = make_cpu_backend();
  auto src = dev->make_kv(layout_of(true));
  auto dst = dev->make_kv(layout_of(true));
  const std::vector<std::vector<int32_t>> tables{{3, 5}};
  const paged_step s = paged_step::make(tables, {{0, 0, 8}});
  auto rows = random_floats(8 * row, 3);
  const tensor k{rows.data(), 8, row, row};
  dev->kv_write(*src, 1, k, k, s.view());
  std::vector<float> keys(block_tokens * row);
  // No values array: with aliased values only the keys travel.
  dev->read_kv_block(*src, 1, 5, keys.data(), nullptr);
  CHECK(std::vector<float>(rows.begin() + 4 * row, rows.end()) == keys);
  dev->write_kv_block(*dst, 1, 0, keys.data(), nullptr);
  std::vector<float> back(keys.size());
  dev->read_kv_block(*dst, 1, 0, back.data(), nullptr);
  CHECK(back == keys);
}

// Paged KV writes and attention on CUDA: against the CPU backend over shuffled block tables,
// with GQA, sliding windows, head sizes that are and are not multiples of 32, prefill then
// decode, float32 and bfloat16 KV caches; and block placement must not change a single bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "tests/gpu/cuda_test_support.hpp"
#include "tests/gpu/paged_batch.hpp"

using namespace brigade::gpu;
using namespace brigade::gpu::test;

namespace {

constexpr int heads = 8;
constexpr int kv_heads = 2;
constexpr int block_tokens = 4;
constexpr int blocks = 64;
const std::vector<int> lengths = {1, 6, 23, 41};

kv_layout layout_for(int head_dim, dtype element = dtype::f32) {
  kv_layout l;
  l.element = element;
  l.layers = 2;
  l.blocks = blocks;
  l.block_tokens = block_tokens;
  l.kv_heads = kv_heads;
  l.head_dim = head_dim;
  return l;
}

// Prefill every sequence but its last token, then decode the last tokens together.
std::vector<std::vector<token_range>> prefill_then_decode() {
  std::vector<token_range> prefill, decode;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int len = lengths[s];
    if (len > 1) prefill.push_back({static_cast<int>(s), 0, len - 1});
    decode.push_back({static_cast<int>(s), len - 1, 1});
  }
  return {prefill, decode};
}

// Runs both steps on `dev`: writes random K/V to both layers, attends on layer 1, and returns
// the attention outputs of every step, concatenated.
std::vector<float> run_steps(backend& dev, kv_storage& kv,
                             const std::vector<std::vector<int32_t>>& tables, int head_dim,
                             int window, uint32_t seed) {
  std::mt19937 rng(seed);
  const int q_cols = heads * head_dim;
  const int kv_cols = kv_heads * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<float> outputs;
  for (const auto& ranges : prefill_then_decode()) {
    const paged_step step = paged_step::make(tables, ranges);
    const int t = step.view().tokens;
    // q, k and v side by side as in the model's qkv buffer: strided views.
    const int width = q_cols + 2 * kv_cols;
    for (int layer = 0; layer < 2; ++layer) {
      const std::vector<float> qkv = random_floats(rng, static_cast<size_t>(t) * width);
      activation buf = to_device(dev, qkv, t, width);
      const tensor q = buf.view().cols_view(0, q_cols);
      dev.kv_write(kv, layer, buf.view().cols_view(q_cols, kv_cols),
                   buf.view().cols_view(q_cols + kv_cols, kv_cols), step.view());
      if (layer == 0) continue;
      activation out = dev.alloc(t, q_cols);
      dev.attention(q, kv, layer, step.view(), heads, scale, window, out.view());
      const std::vector<float> host = to_host(dev, out.view());
      outputs.insert(outputs.end(), host.begin(), host.end());
    }
  }
  return outputs;
}

}  // namespace

TEST_CASE("cuda attention over shuffled block tables matches the CPU", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  for (dtype element : {dtype::f32, dtype::bf16}) {
    for (int head_dim : {64, 96, 128, 256}) {
      for (int window : {0, 7}) {
        const uint32_t seed = 800 + static_cast<uint32_t>(head_dim) + static_cast<uint32_t>(window);
        INFO("seed " << seed << ", head_dim " << head_dim << ", window " << window << ", KV "
                     << dtype_name(element));
        std::mt19937 rng(seed);
        const auto tables = make_tables(lengths, block_tokens, blocks, &rng);
        auto gkv = gpu->make_kv(layout_for(head_dim, element));
        auto ckv = cpu->make_kv(layout_for(head_dim, element));
        const std::vector<float> got = run_steps(*gpu, *gkv, tables, head_dim, window, seed);
        const std::vector<float> want = run_steps(*cpu, *ckv, tables, head_dim, window, seed);
        // Outputs are convex combinations of values in [-1, 1]; the softmax is computed online
        // on the GPU and in two passes on the CPU, a few float roundings apart. A bf16 cache
        // holds the same bits on both, so the bound is the same.
        REQUIRE(max_abs_diff(got, want) <= 2e-5f);
      }
    }
  }
}

TEST_CASE("cuda KV blocks copy out and in exactly as the CPU backend's", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int head_dim = 64;
  for (dtype element : {dtype::f32, dtype::bf16}) {
    const uint32_t seed = 950;
    INFO("seed " << seed << ", KV " << dtype_name(element));
    std::mt19937 rng(seed);
    const auto tables = make_tables(lengths, block_tokens, blocks, &rng);
    auto gkv = gpu->make_kv(layout_for(head_dim, element));
    auto ckv = cpu->make_kv(layout_for(head_dim, element));
    const std::vector<float> got = run_steps(*gpu, *gkv, tables, head_dim, 0, seed);
    const std::vector<float> want = run_steps(*cpu, *ckv, tables, head_dim, 0, seed);
    REQUIRE(max_abs_diff(got, want) <= 2e-5f);
    // Every block of sequence 3 (41 tokens) in layer 1, out of the GPU, equals the CPU's (a bf16
    // block widened on the host), and written into a fresh GPU cache it reads back unchanged.
    const size_t floats = static_cast<size_t>(block_tokens) * kv_heads * head_dim;
    std::vector<float> gk(floats), gv(floats), ck(floats), cv(floats), rk(floats), rv(floats);
    auto fresh = gpu->make_kv(layout_for(head_dim, element));
    for (int32_t block : tables[3]) {
      INFO("block " << block);
      gpu->read_kv_block(*gkv, 1, block, gk.data(), gv.data());
      cpu->read_kv_block(*ckv, 1, block, ck.data(), cv.data());
      REQUIRE(std::memcmp(gk.data(), ck.data(), sizeof(float) * floats) == 0);
      REQUIRE(std::memcmp(gv.data(), cv.data(), sizeof(float) * floats) == 0);
      gpu->write_kv_block(*fresh, 0, block, gk.data(), gv.data());
      gpu->read_kv_block(*fresh, 0, block, rk.data(), rv.data());
      REQUIRE(rk == gk);
      REQUIRE(rv == gv);
    }
  }
}

TEST_CASE("cuda attention does not depend on where the blocks lie", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  for (int window : {0, 5}) {
    const uint32_t seed = 900 + static_cast<uint32_t>(window);
    INFO("seed " << seed << ", window " << window);
    std::mt19937 rng(seed);
    const auto shuffled = make_tables(lengths, block_tokens, blocks, &rng);
    const auto in_order = make_tables(lengths, block_tokens, blocks, nullptr);
    auto kv_a = gpu->make_kv(layout_for(128));
    auto kv_b = gpu->make_kv(layout_for(128));
    const std::vector<float> a = run_steps(*gpu, *kv_a, shuffled, 128, window, seed);
    const std::vector<float> b = run_steps(*gpu, *kv_b, in_order, 128, window, seed);
    REQUIRE(a.size() == b.size());
    REQUIRE(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
  }
}

TEST_CASE("the cuda backend refuses an f16 KV layout, naming the types it keeps", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  kv_layout l = layout_for(64);
  l.element = dtype::f16;
  CHECK_THROWS_WITH(gpu->make_kv(l),
                    Catch::Contains("float32 or bfloat16") && Catch::Contains("float16"));
  // A bf16 cache takes half the memory of an f32 one.
  CHECK(gpu->make_kv(layout_for(64, dtype::bf16))->bytes() * 2 ==
        gpu->make_kv(layout_for(64))->bytes());
}

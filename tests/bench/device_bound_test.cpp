// The bounds of `bench engine --device cuda:N` on a config small enough to count by hand.
#include <catch2/catch.hpp>

#include "bench/device_bound.hpp"

using namespace brigade;

namespace {

// 2 MoE layers, hidden 64; per layer: attention 64 x 16 x (2 x 4 + 2 x 2) = 12288, router
// 64 x 8 = 512, one expert 3 x 64 x 32 = 6144; output head 1000 x 64 = 64000.
model::model_config small_moe() {
  model::model_config c;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.num_experts = 8;
  c.top_k = 2;
  c.expert_intermediate = 32;
  c.max_positions = 4096;
  return c;
}

// Everything a step reads once: the head and both layers' attention and routers.
constexpr double shared_params = 64000 + 2 * (12288 + 512);

}  // namespace

TEST_CASE(
    "active weight bytes per token count attention, router, top-k experts, embedding row "
    "and head",
    "[bench][device_bound]") {
  const model::model_config c = small_moe();
  const double params = shared_params + 64 + 2 * 2 * 6144;  // + embedding row + top-2 experts
  CHECK(bench::active_weight_bytes_per_token(c, 2) == Approx(2 * params));
  CHECK(bench::active_weight_bytes_per_token(c, 4) == Approx(4 * params));

  model::model_config shared = c;
  shared.shared_expert_intermediate = 16;  // Qwen2-MoE: a gated shared expert in each layer
  CHECK(bench::active_weight_bytes_per_token(shared, 2) ==
        Approx(2 * (params + 2 * (3 * 64 * 16 + 64))));
}

TEST_CASE("decode at batch 1 reads the active weights, and a batch each expert it routes to once",
          "[bench][device_bound]") {
  const model::model_config c = small_moe();
  CHECK(bench::expected_experts_read(c, 1) == Approx(2.0));
  CHECK(bench::expected_experts_read(c, 4) == Approx(8 * (1 - 0.75 * 0.75 * 0.75 * 0.75)));
  CHECK(bench::expected_experts_read(c, 10000) == Approx(8.0));
  const bench::decode_step_reads one = bench::decode_step_bytes(c, 2, 4, 1, 10);
  CHECK(one.weight_bytes == Approx(bench::active_weight_bytes_per_token(c, 2)));
  // f32 KV: keys and values of 2 heads x 16 in 2 layers, 512 bytes a token.
  CHECK(one.kv_bytes == Approx(10 * 512));
  const bench::decode_step_reads four = bench::decode_step_bytes(c, 2, 4, 4, 10);
  CHECK(four.weight_bytes ==
        Approx(2 * (shared_params + 4 * 64 + 2 * bench::expected_experts_read(c, 4) * 6144)));
  CHECK(four.kv_bytes == Approx(4 * 10 * 512));
}

TEST_CASE("decode is bound by bandwidth or FLOPs, whichever is less, and prefill by FLOPs",
          "[bench][device_bound]") {
  const model::model_config c = small_moe();
  // 2 FLOPs per weight multiplied (no embedding) and 2 x 4 heads x 32 dims per position.
  const double matrix_flops = 2 * (shared_params + 2 * 2 * 6144);
  CHECK(bench::flops_per_token(c, 10) == Approx(matrix_flops + 2 * 2 * 4 * 32 * 10));

  const bench::device_peaks slow_memory{1.0, 1.0};  // 1 GB/s, 1 TFLOP/s
  const bench::throughput_bound b = bench::decode_bound(c, 2, 4, 4, 10, slow_memory);
  CHECK(b.by_bandwidth);
  CHECK(b.tokens_per_s == Approx(4 * 1e9 / bench::decode_step_bytes(c, 2, 4, 4, 10).total()));

  const bench::device_peaks slow_math{1e6, 1e-6};  // 1 PB/s, 1 MFLOP/s
  const bench::throughput_bound f = bench::decode_bound(c, 2, 4, 4, 10, slow_math);
  CHECK_FALSE(f.by_bandwidth);
  CHECK(f.tokens_per_s == Approx(1e6 / bench::flops_per_token(c, 10)));

  // A 511-token prompt attends to 256 positions per token on average.
  CHECK(bench::prefill_flop_bound_tokens_per_s(c, 511, slow_memory) ==
        Approx(1e12 / (matrix_flops + 2 * 2 * 4 * 32 * 256)));
}

TEST_CASE("a dense model reads every weight per token", "[bench][device_bound]") {
  model::model_config c = small_moe();
  c.num_experts = 0;
  c.top_k = 0;
  c.dense_intermediate = 128;
  const double params = 64000 + 2 * (12288 + 3 * 64 * 128) + 64;
  CHECK(bench::active_weight_bytes_per_token(c, 2) == Approx(2 * params));
  CHECK(bench::decode_step_bytes(c, 2, 4, 8, 1).weight_bytes == Approx(2 * (params + 7 * 64)));
}

// Batch invariance on the GPU: a row's result must not depend on which rows share the call.
// Row r computed alone must equal, bit for bit, the same row inside batches of 3, 17 and 64.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>

#include "tests/gpu/cuda_test_support.hpp"
#include "tests/gpu/paged_batch.hpp"

using namespace brigade::gpu;
using namespace brigade::gpu::test;

namespace {

constexpr int pool_rows = 64;

bool same_bits(const float* a, const float* b, int count) {
  return std::memcmp(a, b, sizeof(float) * static_cast<size_t>(count)) == 0;
}

// The rows of `host` listed in `rows`, dense.
std::vector<float> pick_rows(const std::vector<float>& host, int cols,
                             const std::vector<int>& rows) {
  std::vector<float> out;
  for (int r : rows) {
    const auto begin = host.begin() + static_cast<ptrdiff_t>(r) * cols;
    out.insert(out.end(), begin, begin + cols);
  }
  return out;
}

// Uploads rows into a buffer whose rows start one float in (misaligned) when `offset` is set.
struct placed_rows {
  activation buf;
  tensor view;
};
placed_rows place(backend& dev, const std::vector<float>& host, int rows, int cols, bool offset) {
  placed_rows p;
  p.buf = dev.alloc(rows, cols + (offset ? 3 : 0));
  p.view = p.buf.view().cols_view(offset ? 1 : 0, cols);
  dev.upload(host.data(), p.view);
  return p;
}

std::vector<int> batch_rows(std::mt19937& rng, int size) {
  std::vector<int> rows(pool_rows);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(static_cast<size_t>(size));
  return rows;
}

}  // namespace

TEST_CASE("cuda matmul rows are identical alone and inside batches of 3, 17 and 64", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  const int n = 200;
  uint32_t seed = 1000;
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (int k : {1000, 2048}) {
      INFO("seed " << seed << ", " << dtype_name(type) << ", k " << k);
      std::mt19937 rng(seed++);
      const std::vector<float> x = random_floats(rng, static_cast<size_t>(pool_rows) * k);
      const random_weights w = make_weights(rng, type, n, k);
      auto m = gpu->make_matrix(w.view);
      std::vector<float> alone(static_cast<size_t>(pool_rows) * n);
      for (int r = 0; r < pool_rows; ++r) {
        placed_rows one = place(*gpu, pick_rows(x, k, {r}), 1, k, false);
        activation y = gpu->alloc(1, n);
        gpu->matmul(one.view, *m, nullptr, y.view());
        gpu->download(y.view(), alone.data() + static_cast<size_t>(r) * n);
      }
      for (int size : {3, 17, 64}) {
        for (bool offset : {false, true}) {
          INFO("batch of " << size << (offset ? ", misaligned rows" : ", aligned rows"));
          const std::vector<int> rows = batch_rows(rng, size);
          placed_rows batch = place(*gpu, pick_rows(x, k, rows), size, k, offset);
          activation y = gpu->alloc(size, n);
          gpu->matmul(batch.view, *m, nullptr, y.view());
          const std::vector<float> got = to_host(*gpu, y.view());
          for (int i = 0; i < size; ++i) {
            INFO("batch row " << i << " is row " << rows[static_cast<size_t>(i)]);
            REQUIRE(same_bits(got.data() + static_cast<size_t>(i) * n,
                              alone.data() + static_cast<size_t>(rows[static_cast<size_t>(i)]) * n,
                              n));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda row-wise operations are identical alone and inside batches", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  const int cols = 256, experts = 32, k = 4;
  std::mt19937 rng(1100);
  INFO("seed 1100");
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(pool_rows) * cols, -3, 3);
  const std::vector<float> logits = random_floats(rng, static_cast<size_t>(pool_rows) * experts);
  const std::vector<float> weight = random_floats(rng, cols, 0.5f, 1.5f);
  auto w = gpu->make_vector(weight.data(), weight.size());
  const auto* wp = static_cast<const float*>(w->data());
  // One call's outputs for `rows`: the norm, silu_mul of the row as [gate | up], and routing.
  auto run = [&](const std::vector<int>& rows, std::vector<float>& norm, std::vector<float>& act,
                 std::vector<int32_t>& ids, std::vector<float>& probs) {
    const int size = static_cast<int>(rows.size());
    placed_rows in = place(*gpu, pick_rows(x, cols, rows), size, cols, size % 2 == 1);
    activation y = gpu->alloc(size, cols);
    gpu->rms_norm(in.view, wp, cols, 1e-6f, y.view());
    norm = to_host(*gpu, y.view());
    activation a = gpu->alloc(size, cols / 2);
    gpu->silu_mul(in.view, a.view());
    act = to_host(*gpu, a.view());
    placed_rows l = place(*gpu, pick_rows(logits, experts, rows), size, experts, false);
    ids.resize(static_cast<size_t>(size) * k);
    probs.resize(ids.size());
    gpu->router_topk(l.view, router_spec{k, true}, ids.data(), probs.data());
  };
  for (int size : {3, 17, 64}) {
    INFO("batch of " << size);
    const std::vector<int> rows = batch_rows(rng, size);
    std::vector<float> norm, act, probs;
    std::vector<int32_t> ids;
    run(rows, norm, act, ids, probs);
    for (int i = 0; i < size; ++i) {
      std::vector<float> norm1, act1, probs1;
      std::vector<int32_t> ids1;
      run({rows[static_cast<size_t>(i)]}, norm1, act1, ids1, probs1);
      INFO("batch row " << i);
      REQUIRE(same_bits(norm1.data(), norm.data() + static_cast<size_t>(i) * cols, cols));
      REQUIRE(same_bits(act1.data(), act.data() + static_cast<size_t>(i) * cols / 2, cols / 2));
      REQUIRE(std::equal(ids1.begin(), ids1.end(), ids.begin() + i * k));
      REQUIRE(same_bits(probs1.data(), probs.data() + static_cast<size_t>(i) * k, k));
    }
  }
}

TEST_CASE("cuda attention of a token is identical alone and beside other sequences", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  const int head_dim = 128, heads = 4, kvh = 2, bt = 8, blocks = 64;
  const std::vector<int> lengths = {30, 9, 50, 17};
  std::mt19937 rng(1200);
  INFO("seed 1200");
  kv_layout layout{1, blocks, bt, kvh, head_dim};
  auto kv = gpu->make_kv(layout);
  const auto tables = make_tables(lengths, bt, blocks, &rng);
  // Fill every sequence's keys and values once.
  std::vector<token_range> all;
  for (size_t s = 0; s < lengths.size(); ++s)
    all.push_back({static_cast<int>(s), 0, lengths[s]});
  const paged_step fill = paged_step::make(tables, all);
  const int total = fill.view().tokens;
  const int kv_cols = kvh * head_dim;
  activation k =
      to_device(*gpu, random_floats(rng, static_cast<size_t>(total) * kv_cols), total, kv_cols);
  activation v =
      to_device(*gpu, random_floats(rng, static_cast<size_t>(total) * kv_cols), total, kv_cols);
  gpu->kv_write(*kv, 0, k.view(), v.view(), fill.view());
  const int q_cols = heads * head_dim;
  // Queries for a chunk of sequence 2 (positions 40..49), computed alone and beside the others.
  const std::vector<float> q2 = random_floats(rng, static_cast<size_t>(10) * q_cols);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  auto attend = [&](const std::vector<token_range>& ranges, const std::vector<float>& q,
                    int window) {
    const paged_step step = paged_step::make(tables, ranges);
    const int t = step.view().tokens;
    activation qd = to_device(*gpu, q, t, q_cols);
    activation out = gpu->alloc(t, q_cols);
    gpu->attention(qd.view(), *kv, 0, step.view(), heads, scale, window, out.view());
    return to_host(*gpu, out.view());
  };
  for (int window : {0, 12}) {
    INFO("window " << window);
    const std::vector<float> alone = attend({{2, 40, 10}}, q2, window);
    // Beside a prefill chunk of sequence 0 and decode tokens of sequences 1 and 3.
    std::vector<float> q = random_floats(rng, static_cast<size_t>(19) * q_cols);
    q.insert(q.end(), q2.begin(), q2.end());
    const std::vector<float> other = random_floats(rng, static_cast<size_t>(q_cols));
    q.insert(q.end(), other.begin(), other.end());
    const std::vector<float> together =
        attend({{0, 10, 18}, {1, 8, 1}, {2, 40, 10}, {3, 16, 1}}, q, window);
    REQUIRE(
        same_bits(alone.data(), together.data() + static_cast<size_t>(19) * q_cols, 10 * q_cols));
  }
}

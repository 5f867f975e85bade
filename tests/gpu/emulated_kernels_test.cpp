// brigade's CUDA kernels run on the host by the warp emulator, against the CPU backend and the
// canonical matmul order. These run everywhere, GPU or not: they test the kernels' indexing,
// paging, shuffles and reduction order; the cuda_tests binary tests them on a real device.
#include "tests/gpu/warp_emulator.hpp"
// The emulator must come first: it defines the CUDA built-ins the kernel headers use.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "gpu/cpu/kernels.hpp"
#include "gpu/cuda/attention_kernels.cuh"
#include "gpu/cuda/elementwise_kernels.cuh"
#include "gpu/cuda/matmul_kernel.cuh"
#include "gpu/cuda/routing_kernels.cuh"
#include "tests/gpu/paged_batch.hpp"

using namespace brigade;
using namespace brigade::gpu;
using namespace brigade::gpu::cuda;
using brigade::gpu::test::paged_step;
using brigade::gpu::test::token_range;

namespace {

auto emulated() {
  return gpu::test::emulator::launcher();
}

std::vector<float> randoms(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v)
    x = d(rng);
  return v;
}

// A host matrix [rows, cols] of `type` in the device layout: rows padded to whole chunks.
struct device_layout_weights {
  std::vector<unsigned char> bytes;
  std::vector<float> widened;  // unpadded, row-major
  int pitch = 0;
};

device_layout_weights make_weights(std::mt19937& rng, dtype type, int rows, int cols) {
  device_layout_weights w;
  w.pitch = (cols + matrix_chunk - 1) / matrix_chunk * matrix_chunk;
  const size_t elem = dtype_size(type);
  w.bytes.assign(static_cast<size_t>(rows) * w.pitch * elem, 0);
  w.widened.resize(static_cast<size_t>(rows) * cols);
  const std::vector<float> v = randoms(rng, w.widened.size(), -0.5f, 0.5f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      unsigned char* dst = w.bytes.data() + (static_cast<size_t>(r) * w.pitch + c) * elem;
      if (type == dtype::f32) {
        std::memcpy(dst, &v[i], 4);
      } else {
        const uint16_t bits = type == dtype::bf16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        std::memcpy(dst, &bits, 2);
      }
      to_f32(type, dst, &w.widened[i], 1);
    }
  }
  return w;
}

// Largest |a[i] - b[i]|, or infinity when a difference is NaN (which std::max would drop).
float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, sizeof(float) * n) == 0;
}

// y = x W^T (+ bias) by the emulated kernel; x rows start `offset` floats into rows of
// k + offset + 1 floats, so an odd offset takes the element-by-element load path.
std::vector<float> emulated_matmul(const std::vector<float>& x, int m, int k, int offset,
                                   const device_layout_weights& w, dtype type, int n,
                                   const float* bias) {
  const int ldx = k + offset + 1;
  std::vector<float> xs(static_cast<size_t>(m) * ldx, NAN);
  for (int r = 0; r < m; ++r) {
    std::copy_n(x.begin() + static_cast<ptrdiff_t>(r) * k, k,
                xs.begin() + static_cast<ptrdiff_t>(r) * ldx + offset);
  }
  std::vector<float> y(static_cast<size_t>(m) * n, NAN);
  const matmul_args a{xs.data() + offset, ldx, m, w.bytes.data(), w.pitch, n, k, bias, y.data(), n};
  dispatch_matmul(type, a, emulated());
  return y;
}

}  // namespace

TEST_CASE("emulated matmul kernel follows the canonical order for every dtype and shape",
          "[cuda][emulated]") {
  struct shape {
    int m, n, k;
  };
  const shape shapes[] = {{1, 1, 1},    {1, 33, 7},   {2, 16, 8},
                          {3, 50, 100}, {5, 17, 257}, {4, 3, 300}};
  uint32_t seed = 1;
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (const shape& s : shapes) {
      for (int offset : {0, 1}) {
        INFO("seed " << seed << ", " << dtype_name(type) << " m=" << s.m << " n=" << s.n
                     << " k=" << s.k << " offset " << offset);
        std::mt19937 rng(seed++);
        const std::vector<float> x = randoms(rng, static_cast<size_t>(s.m) * s.k);
        const device_layout_weights w = make_weights(rng, type, s.n, s.k);
        const std::vector<float> bias = randoms(rng, static_cast<size_t>(s.n));
        const float* b = offset == 0 ? bias.data() : nullptr;
        const std::vector<float> y = emulated_matmul(x, s.m, s.k, offset, w, type, s.n, b);
        for (int r = 0; r < s.m; ++r) {
          for (int c = 0; c < s.n; ++c) {
            float want = canonical_dot(x.data() + static_cast<size_t>(r) * s.k,
                                       w.widened.data() + static_cast<size_t>(c) * s.k, s.k);
            if (b) want = want + b[c];
            INFO("row " << r << " col " << c);
            REQUIRE(same_bits(&y[static_cast<size_t>(r) * s.n + c], &want, 1));
          }
        }
      }
    }
  }
}

TEST_CASE("emulated matmul rows are identical alone and inside batches", "[cuda][emulated]") {
  const int k = 203, n = 21, pool = 17;
  std::mt19937 rng(50);
  INFO("seed 50");
  const std::vector<float> x = randoms(rng, static_cast<size_t>(pool) * k);
  const device_layout_weights w = make_weights(rng, dtype::bf16, n, k);
  const std::vector<float> all = emulated_matmul(x, pool, k, 1, w, dtype::bf16, n, nullptr);
  for (int r = 0; r < pool; ++r) {
    const std::vector<float> row(x.begin() + static_cast<ptrdiff_t>(r) * k,
                                 x.begin() + static_cast<ptrdiff_t>(r + 1) * k);
    const std::vector<float> alone = emulated_matmul(row, 1, k, 0, w, dtype::bf16, n, nullptr);
    INFO("row " << r);
    REQUIRE(same_bits(alone.data(), all.data() + static_cast<size_t>(r) * n, n));
  }
}

// A layer's experts in one launch: every job's output has the bits of its own launch, whatever
// the group's tile height (set by its largest job) and load width (scalar when any job's rows
// are unaligned). Jobs of 1 to 9 rows, of different widths and depths, one with a k tail.
TEST_CASE("emulated grouped matmul gives each product the bits of its own launch",
          "[cuda][emulated]") {
  std::mt19937 rng(51);
  INFO("seed 51");
  struct shape {
    int m, n, k, offset;
  };
  for (const std::vector<shape>& group :
       {std::vector<shape>{{1, 40, 64, 0}, {1, 24, 64, 0}, {1, 33, 64, 0}},
        std::vector<shape>{{1, 40, 96, 0}, {2, 17, 96, 0}},
        std::vector<shape>{{3, 21, 203, 0}, {1, 50, 203, 1}, {9, 16, 203, 0}, {5, 7, 64, 0}}}) {
    INFO("a group of " << group.size() << " jobs, first of " << group[0].m << " rows");
    std::vector<std::vector<float>> xs, ys;
    std::vector<device_layout_weights> ws;
    std::vector<matmul_args> jobs;
    for (const shape& g : group) {
      const int ldx = g.k + g.offset + 1;
      xs.push_back(randoms(rng, static_cast<size_t>(g.m) * ldx));
      ws.push_back(make_weights(rng, dtype::bf16, g.n, g.k));
      ys.emplace_back(static_cast<size_t>(g.m) * g.n, NAN);
    }
    for (size_t j = 0; j < group.size(); ++j) {
      const shape& g = group[j];
      jobs.push_back({xs[j].data() + g.offset, g.k + g.offset + 1, g.m, ws[j].bytes.data(),
                      ws[j].pitch, g.n, g.k, nullptr, ys[j].data(), g.n});
    }
    std::vector<int> first_block(jobs.size());
    const matmul_group_plan plan =
        plan_matmul_group(jobs.data(), static_cast<int>(jobs.size()), first_block.data());
    dispatch_grouped_matmul(dtype::bf16, plan, jobs.data(), first_block.data(),
                            static_cast<int>(jobs.size()), emulated());
    for (size_t j = 0; j < group.size(); ++j) {
      INFO("job " << j);
      std::vector<float> alone(ys[j].size(), NAN);
      matmul_args a = jobs[j];
      a.y = alone.data();
      dispatch_matmul(dtype::bf16, a, emulated());
      REQUIRE(same_bits(alone.data(), ys[j].data(), alone.size()));
    }
  }
}

TEST_CASE("emulated paged KV write and attention match the CPU backend", "[cuda][emulated]") {
  // Both KV element types: float32, and bfloat16 (stored rounded to nearest even, the same bits
  // as the CPU backend's, and attended over widened).
  auto cpu = make_cpu_backend();
  const int heads = 8, kvh = 2, bt = 4, blocks = 64;
  const std::vector<int> lengths = {1, 6, 23, 41};
  for (dtype element : {dtype::f32, dtype::bf16}) {
    for (int head_dim : {64, 96}) {
      for (int window : {0, 7}) {
        const uint32_t seed = 60 + static_cast<uint32_t>(head_dim + window);
        INFO("seed " << seed << ", head_dim " << head_dim << ", window " << window << ", KV "
                     << dtype_name(element));
        std::mt19937 rng(seed);
        kv_layout layout{2, blocks, bt, kvh, head_dim};
        layout.element = element;
        auto ckv = cpu->make_kv(layout);
        const size_t total = static_cast<size_t>(2) * blocks * bt * kvh * head_dim;
        // The emulated device's KV: float32 elements, or bf16 bits; zero where nothing was
        // written, as the CPU backend's storage starts.
        std::vector<float> keys(total, 0.0f), values(total, 0.0f);
        std::vector<uint16_t> keys16(total, 0), values16(total, 0);
        void* key_store = element == dtype::bf16 ? static_cast<void*>(keys16.data()) : keys.data();
        void* value_store =
            element == dtype::bf16 ? static_cast<void*>(values16.data()) : values.data();
        const auto tables = gpu::test::make_tables(lengths, bt, blocks, &rng);
        std::vector<token_range> prefill, decode;
        for (size_t s = 0; s < lengths.size(); ++s) {
          if (lengths[s] > 1) prefill.push_back({static_cast<int>(s), 0, lengths[s] - 1});
          decode.push_back({static_cast<int>(s), lengths[s] - 1, 1});
        }
        const int q_cols = heads * head_dim, kv_cols = kvh * head_dim;
        const int width = q_cols + 2 * kv_cols;
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        for (const auto& ranges : {prefill, decode}) {
          const paged_step step = paged_step::make(tables, ranges);
          const attention_batch ab = step.view();
          const device_batch db{ab.positions, ab.token_seq, ab.block_offsets,
                                ab.block_ids, ab.tokens,    ab.seqs};
          for (int layer = 0; layer < 2; ++layer) {
            std::vector<float> qkv = randoms(rng, static_cast<size_t>(ab.tokens) * width);
            const tensor all{qkv.data(), ab.tokens, width, width};
            const tensor q = all.cols_view(0, q_cols);
            const tensor k = all.cols_view(q_cols, kv_cols);
            const tensor v = all.cols_view(q_cols + kv_cols, kv_cols);
            cpu->kv_write(*ckv, layer, k, v, ab);
            const kv_shape shape{layer, blocks, bt, kvh, head_dim, element};
            dispatch_kv_write(key_store, value_store, shape, k, v, db, emulated());
            if (layer == 0) continue;
            std::vector<float> want(static_cast<size_t>(ab.tokens) * q_cols);
            std::vector<float> got(want.size(), NAN);
            const tensor want_t{want.data(), ab.tokens, q_cols, q_cols};
            const tensor got_t{got.data(), ab.tokens, q_cols, q_cols};
            cpu->attention(q, *ckv, layer, ab, heads, scale, window, want_t);
            const attention_args a{key_store, value_store, shape, q,     got_t,
                                   db,        heads,       scale, window};
            dispatch_attention(a, emulated());
            REQUIRE(max_diff(got, want) <= 2e-5f);
          }
        }
        // The stored elements, as the CPU backend hands its blocks out (its own layout may
        // differ from the device's rows): bf16 widened exactly, so equal floats are equal bits.
        const size_t block_floats = static_cast<size_t>(bt) * kvh * head_dim;
        std::vector<float> got_keys(block_floats), got_values(block_floats);
        for (int layer = 0; layer < 2; ++layer) {
          for (int b = 0; b < blocks; ++b) {
            cpu->read_kv_block(*ckv, layer, b, got_keys.data(), got_values.data());
            const size_t at = static_cast<size_t>(layer * blocks + b) * block_floats;
            std::vector<float> want_keys(block_floats), want_values(block_floats);
            for (size_t i = 0; i < block_floats; ++i) {
              want_keys[i] = element == dtype::bf16 ? bf16_to_f32(keys16[at + i]) : keys[at + i];
              want_values[i] =
                  element == dtype::bf16 ? bf16_to_f32(values16[at + i]) : values[at + i];
            }
            INFO("layer " << layer << ", block " << b);
            REQUIRE(same_bits(want_keys.data(), got_keys.data(), block_floats));
            REQUIRE(same_bits(want_values.data(), got_values.data(), block_floats));
          }
        }
      }
    }
  }
}

TEST_CASE("emulated bf16 KV write rounds as the CPU backend does, NaN and infinities included",
          "[cuda][emulated]") {
  // One token of one KV head: every value a rounding case (ties to even up and down, values that
  // carry into the exponent, the largest finite float, infinities, NaN, signed zero).
  const std::vector<float> cases = {
      1.0f,
      1.00390625f,    // a tie: 1 + 2^-8, rounds to even (1.0)
      1.01171875f,    // a tie: 1 + 3 * 2^-8, rounds up
      1.0039063f,     // just over a tie, rounds up
      -2.9960938f,    // carries into the exponent
      3.4028235e38f,  // the largest finite float rounds to infinity
      INFINITY,      -INFINITY, std::numeric_limits<float>::quiet_NaN(), -0.0f,
      1e-40f,  // subnormal
      65504.0f};
  const int head_dim = static_cast<int>(cases.size());
  std::vector<float> kv_row(cases);
  std::vector<uint16_t> keys(static_cast<size_t>(head_dim)), values(keys.size());
  const int32_t position = 0, seq = 0, offsets[2] = {0, 1}, block = 0;
  const device_batch db{&position, &seq, offsets, &block, 1, 1};
  const tensor k{kv_row.data(), 1, head_dim, head_dim};
  const kv_shape shape{0, 1, 1, 1, head_dim, dtype::bf16};
  dispatch_kv_write(keys.data(), values.data(), shape, k, k, db, emulated());
  for (int i = 0; i < head_dim; ++i) {
    INFO("value " << cases[static_cast<size_t>(i)]);
    REQUIRE(keys[static_cast<size_t>(i)] == f32_to_bf16(cases[static_cast<size_t>(i)]));
    REQUIRE(values[static_cast<size_t>(i)] == keys[static_cast<size_t>(i)]);
  }
}

// The norm's kernel loads a lane's elements in batches; its sum must stay the plain per-lane
// chain plus the butterfly, computed here element by element, bit for bit (and not the CPU's
// order, which the row-wise test below holds only to a tolerance). Groups wide enough for whole
// batches, with and without a tail.
TEST_CASE("emulated rms_norm sums each lane in order at any width", "[cuda][emulated]") {
  std::mt19937 rng(71);
  INFO("seed 71");
  for (int group : {32, 500, 512, 1568, 2048, 2080}) {
    INFO("group " << group);
    const int rows = 2;
    std::vector<float> x = randoms(rng, static_cast<size_t>(rows) * group, -3, 3), y(x.size());
    const std::vector<float> weight = randoms(rng, static_cast<size_t>(group), 0.5f, 1.5f);
    dispatch_rms_norm(tensor{x.data(), rows, group, group}, weight.data(), group, 1e-6f,
                      tensor{y.data(), rows, group, group}, emulated());
    for (int r = 0; r < rows; ++r) {
      const float* in = x.data() + static_cast<size_t>(r) * group;
      float lane[32];
      for (int l = 0; l < 32; ++l) {
        lane[l] = 0.0f;
        for (int i = l; i < group; i += 32)
          lane[l] = std::fma(in[i], in[i], lane[l]);
      }
      for (int offset = 16; offset > 0; offset /= 2) {
        float next[32];
        for (int l = 0; l < 32; ++l)
          next[l] = lane[l] + lane[l ^ offset];
        std::copy(next, next + 32, lane);
      }
      const float inv = 1.0f / std::sqrt(lane[0] / static_cast<float>(group) + 1e-6f);
      for (int i = 0; i < group; ++i) {
        const float want = (in[i] * inv) * weight[static_cast<size_t>(i)];
        REQUIRE(same_bits(&y[static_cast<size_t>(r) * group + i], &want, 1));
      }
    }
  }
}

// Attention's key score loads a key in batches; the dot must stay one chain in dimension order,
// for f32 and bf16 keys, head sizes with and without a tail.
TEST_CASE("emulated attention scores a key as one chain in dimension order", "[cuda][emulated]") {
  std::mt19937 rng(72);
  INFO("seed 72");
  for (int head_dim : {8, 64, 100, 128}) {
    INFO("head_dim " << head_dim);
    const std::vector<float> q = randoms(rng, static_cast<size_t>(head_dim), -2, 2);
    const std::vector<float> key = randoms(rng, static_cast<size_t>(head_dim), -2, 2);
    std::vector<unsigned short> key_bf16(key.size());
    for (size_t d = 0; d < key.size(); ++d)
      key_bf16[d] = f32_to_bf16(key[d]);
    float want = 0.0f, want_bf16 = 0.0f;
    for (int d = 0; d < head_dim; ++d) {
      want = std::fma(q[static_cast<size_t>(d)], key[static_cast<size_t>(d)], want);
      want_bf16 = std::fma(q[static_cast<size_t>(d)], bf16_to_f32(key_bf16[static_cast<size_t>(d)]),
                           want_bf16);
    }
    want *= 0.125f;
    want_bf16 *= 0.125f;
    const float got = key_score(q.data(), key.data(), head_dim, 0.125f);
    const float got_bf16 = key_score(q.data(), key_bf16.data(), head_dim, 0.125f);
    CHECK(same_bits(&got, &want, 1));
    CHECK(same_bits(&got_bf16, &want_bf16, 1));
  }
}

TEST_CASE("emulated row-wise kernels match the CPU backend", "[cuda][emulated]") {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(70);
  INFO("seed 70");
  const int rows = 7, cols = 192, stride = 200;
  auto fresh = [&](float lo, float hi) {
    return randoms(rng, static_cast<size_t>(rows) * stride, lo, hi);
  };
  auto view = [&](std::vector<float>& v) { return tensor{v.data() + 3, rows, cols, stride}; };
  auto close = [&](const std::vector<float>& a, const std::vector<float>& b, float tol) {
    return max_diff(a, b) <= tol;
  };

  const std::vector<float> weight = randoms(rng, cols, 0.5f, 1.5f);
  for (int group : {cols, 64}) {
    std::vector<float> x = fresh(-3, 3), a = x, b = x;
    cpu->rms_norm(view(x), weight.data(), group, 1e-6f, view(a));
    dispatch_rms_norm(view(x), weight.data(), group, 1e-6f, view(b), emulated());
    CHECK(close(a, b, 2e-5f));
    std::vector<float> in_place = x;
    dispatch_rms_norm(view(in_place), weight.data(), group, 1e-6f, view(in_place), emulated());
    CHECK(same_bits(in_place.data(), b.data(), in_place.size()));
  }

  const int heads = 3, head_dim = 64, half = head_dim / 2, positions_max = 50;
  const std::vector<float> cos_t = randoms(rng, static_cast<size_t>(positions_max) * half);
  const std::vector<float> sin_t = randoms(rng, cos_t.size());
  std::vector<int32_t> positions(rows);
  for (int32_t& p : positions)
    p = static_cast<int32_t>(rng() % positions_max);
  std::vector<float> r1 = fresh(-1, 1), r2 = r1;
  cpu->rope(view(r1), positions.data(), heads, head_dim, cos_t.data(), sin_t.data());
  dispatch_rope(view(r2), positions.data(), heads, head_dim, cos_t.data(), sin_t.data(),
                emulated());
  CHECK(same_bits(r1.data(), r2.data(), r1.size()));

  std::vector<float> gu = fresh(-6, 6), s1(static_cast<size_t>(rows) * stride, 0.0f), s2 = s1;
  const tensor gate_up{gu.data(), rows, cols, stride};
  cpu->silu_mul(gate_up, tensor{s1.data(), rows, cols / 2, stride});
  dispatch_silu_mul(gate_up, tensor{s2.data(), rows, cols / 2, stride}, emulated());
  CHECK(close(s1, s2, 1e-5f));

  std::vector<float> y = fresh(-2, 2), a1 = fresh(-2, 2), a2 = a1;
  cpu->add(view(a1), view(y));
  dispatch_add(view(a2), view(y), emulated());
  cpu->clamp(view(a1), 1.5f);
  dispatch_clamp(view(a2), 1.5f, emulated());
  CHECK(same_bits(a1.data(), a2.data(), a1.size()));

  const std::vector<int32_t> picks = {6, 0, 3, 3, 5};
  std::vector<float> g1(picks.size() * cols), g2(g1.size(), NAN);
  cpu->gather_rows(view(y), picks.data(), tensor{g1.data(), 5, cols, cols});
  dispatch_copy_rows<true>(view(y), picks.data(), tensor{g2.data(), 5, cols, cols}, emulated());
  CHECK(same_bits(g1.data(), g2.data(), g1.size()));
  const std::vector<int32_t> targets = {4, 9, 0, 2, 7};
  std::vector<float> t1(10 * cols, 0.0f), t2 = t1;
  cpu->scatter_rows(tensor{g1.data(), 5, cols, cols}, targets.data(),
                    tensor{t1.data(), 10, cols, cols});
  dispatch_copy_rows<false>(tensor{g1.data(), 5, cols, cols}, targets.data(),
                            tensor{t2.data(), 10, cols, cols}, emulated());
  CHECK(same_bits(t1.data(), t2.data(), t1.size()));
}

// DeepSeek-V3's router. On the host both sides call the same expf, so ids and weights must
// agree bit for bit; rows of ties and of NaN and infinite logits check the selection rule.
TEST_CASE("emulated sigmoid router matches the CPU backend's grouped top-k", "[cuda][emulated]") {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(910);
  INFO("seed 910");
  const int rows = 14, experts = 32;
  std::vector<float> logits = randoms(rng, static_cast<size_t>(rows) * experts, -4.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < experts; ++i)
    logits[static_cast<size_t>(rows - 3) * experts + i] = 0.25f;  // all tied
  logits[static_cast<size_t>(rows - 2) * experts + 5] = std::nanf("");
  logits[static_cast<size_t>(rows - 2) * experts + 9] = inf;
  logits[static_cast<size_t>(rows - 1) * experts + 0] = -inf;
  logits[static_cast<size_t>(rows - 1) * experts + 30] = inf;
  const std::vector<float> bias = randoms(rng, experts, -0.3f, 0.3f);
  const tensor lt{logits.data(), rows, experts, experts};
  struct shape {
    int k, groups, top_groups;
    bool normalize, with_bias;
    float scale;
  };
  for (const shape& c : {shape{4, 1, 1, true, true, 1.0f}, shape{6, 8, 3, true, true, 2.5f},
                         shape{3, 4, 2, false, false, 1.0f}, shape{8, 32, 8, true, true, 0.5f},
                         shape{2, 2, 1, false, true, 16.0f}, shape{20, 2, 2, true, true, 1.0f}}) {
    INFO("top_k " << c.k << ", groups " << c.groups << " keeping " << c.top_groups << ", normalize "
                  << c.normalize << ", bias " << c.with_bias << ", scale " << c.scale);
    router_spec spec;
    spec.top_k = c.k;
    spec.normalize = c.normalize;
    spec.sigmoid = true;
    spec.host_bias = c.with_bias ? bias.data() : nullptr;
    spec.groups = c.groups;
    spec.top_groups = c.top_groups;
    spec.scale = c.scale;
    sigmoid_router kernel_spec;
    kernel_spec.top_k = c.k;
    kernel_spec.normalize = c.normalize;
    kernel_spec.bias = spec.host_bias;
    kernel_spec.groups = c.groups;
    kernel_spec.top_groups = c.top_groups;
    kernel_spec.scale = c.scale;
    const size_t slots = static_cast<size_t>(rows) * c.k;
    std::vector<int32_t> ce(slots), ge(slots, -7);
    std::vector<float> cw(slots), gw(slots);
    cpu->router_topk(lt, spec, ce.data(), cw.data());
    dispatch_router_sigmoid_topk(lt, kernel_spec, ge.data(), gw.data(), emulated());
    CHECK(ce == ge);
    CHECK(same_bits(cw.data(), gw.data(), slots));
    for (int32_t id : ge)
      CHECK((id >= 0 && id < experts));
  }
}

TEST_CASE("emulated embedding, routing and combine kernels match the CPU backend",
          "[cuda][emulated]") {
  auto cpu = make_cpu_backend();
  std::mt19937 rng(80);
  INFO("seed 80");
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    INFO(dtype_name(type));
    const device_layout_weights table = make_weights(rng, type, 30, 43);
    const std::vector<int32_t> ids = {29, 0, 4, 4, 17};
    std::vector<float> got(ids.size() * 43, NAN);
    dispatch_embed(type, table.bytes.data(), table.pitch, ids.data(), tensor{got.data(), 5, 43, 43},
                   emulated());
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(same_bits(got.data() + i * 43, table.widened.data() + static_cast<size_t>(ids[i]) * 43,
                      43));
    }
  }

  const int rows = 9, experts = 40;
  std::vector<float> logits(static_cast<size_t>(rows) * experts);
  std::vector<int> order(experts);
  for (int r = 0; r < rows; ++r) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < experts; ++i) {
      logits[static_cast<size_t>(r) * experts + i] =
          r == rows - 1 ? 0.5f : 0.05f * static_cast<float>(order[i]);
    }
  }
  const tensor lt{logits.data(), rows, experts, experts};
  // 20 passes the kernel's thread-local copy of the picks (16): the scan reads the output.
  for (int k : {1, 3, 8, 20}) {
    for (bool normalize : {true, false}) {
      INFO("top_k " << k << ", normalize " << normalize);
      const size_t slots = static_cast<size_t>(rows) * k;
      std::vector<int32_t> ce(slots), ge(slots);
      std::vector<float> cw(slots), gw(slots);
      cpu->router_topk(lt, router_spec{k, normalize}, ce.data(), cw.data());
      dispatch_router_topk(lt, k, normalize, ge.data(), gw.data(), emulated());
      CHECK(ce == ge);
      for (size_t i = 0; i < slots; ++i)
        CHECK(std::fabs(cw[i] - gw[i]) <= 1e-6f);
    }
  }

  // An infinite logit makes the softmax NaN for the whole row: no comparison holds, and both
  // backends must still pick distinct experts, lowest index first (an id of -1 would index
  // outside the expert table).
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> wild = {inf, 0.0f, 0.0f, 0.0f, 0.0f, -inf, inf, 1.0f};
  const tensor wt{wild.data(), 2, 4, 4};
  std::vector<int32_t> ce(4), ge(4);
  std::vector<float> cw(4), gw(4);
  cpu->router_topk(wt, router_spec{2, false}, ce.data(), cw.data());
  dispatch_router_topk(wt, 2, false, ge.data(), gw.data(), emulated());
  CHECK(ce == ge);
  CHECK(ge == std::vector<int32_t>{0, 1, 0, 1});

  const int tokens = 5, cols = 24, k = 3;
  const std::vector<float> x = randoms(rng, static_cast<size_t>(tokens) * cols);
  std::vector<float> y = randoms(rng, static_cast<size_t>(tokens) * k * cols);
  std::vector<float> shared = randoms(rng, static_cast<size_t>(tokens) * cols);
  std::vector<float> gate = randoms(rng, static_cast<size_t>(tokens), -3, 3);
  const std::vector<float> weights = randoms(rng, static_cast<size_t>(tokens) * k, 0, 1);
  const tensor yt{y.data(), tokens * k, cols, cols};
  const tensor st{shared.data(), tokens, cols, cols};
  const tensor gt{gate.data(), tokens, 1, 1};
  // No shared expert; one with a gate (Qwen2-MoE's); one without (DeepSeek-V3's).
  for (int with_shared : {0, 1, 2}) {
    INFO("shared expert " << with_shared);
    std::vector<float> c = x, g = x;
    const tensor* s = with_shared ? &st : nullptr;
    const tensor* sg = with_shared == 1 ? &gt : nullptr;
    cpu->combine(tensor{c.data(), tokens, cols, cols}, yt, weights.data(), k, s, sg);
    dispatch_combine(tensor{g.data(), tokens, cols, cols}, yt, weights.data(), k, s, sg,
                     emulated());
    for (size_t i = 0; i < c.size(); ++i)
      CHECK(std::fabs(c[i] - g[i]) <= 2e-6f);
  }
}

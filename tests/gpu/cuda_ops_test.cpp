// Each CUDA backend operation on random inputs against the CPU backend (and, for matmul, against
// the documented reduction order bit for bit). Cases skip, with a warning, without a device.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>

#include "gpu/cuda/matmul_order.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace brigade;
using namespace brigade::gpu;
using namespace brigade::gpu::test;

namespace {

// The same data in both backends, optionally as a column window of a wider buffer so that rows
// are strided and (with an odd offset) not 16-byte aligned.
struct twin {
  activation cpu_buf, gpu_buf;
  tensor cpu, gpu;
};

twin make_twin(backend& cpu, backend& gpu, const std::vector<float>& host, int rows, int cols,
               int col_offset = 0, int extra_cols = 0) {
  twin t;
  const int width = cols + col_offset + extra_cols;
  t.cpu_buf = cpu.alloc(rows, width);
  t.gpu_buf = gpu.alloc(rows, width);
  t.cpu = t.cpu_buf.view().cols_view(col_offset, cols);
  t.gpu = t.gpu_buf.view().cols_view(col_offset, cols);
  cpu.upload(host.data(), t.cpu);
  gpu.upload(host.data(), t.gpu);
  return t;
}

std::vector<float> cpu_host(backend& cpu, const tensor& t) {
  return to_host(cpu, t);
}

// Exact: both backends use correctly rounded operations in the same order.
void require_identical(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::memcmp(&a[i], &b[i], sizeof(float)) == 0);
  }
}

void check_matmul(backend& gpu, backend& cpu, dtype type, int m, int n, int k, bool with_bias,
                  int x_offset, uint32_t seed) {
  INFO("seed " << seed << ", " << dtype_name(type) << ", m=" << m << " n=" << n << " k=" << k
               << ", bias " << with_bias << ", x column offset " << x_offset);
  std::mt19937 rng(seed);
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(m) * k);
  const random_weights w = make_weights(rng, type, n, k);
  const std::vector<float> bias = random_floats(rng, static_cast<size_t>(n));
  twin xt = make_twin(cpu, gpu, x, m, k, x_offset, x_offset > 0 ? 2 : 0);
  auto gpu_w = gpu.make_matrix(w.view);
  auto cpu_w = cpu.make_matrix(w.view);
  auto gpu_bias = gpu.make_vector(bias.data(), bias.size());
  auto cpu_bias = cpu.make_vector(bias.data(), bias.size());
  activation gy = gpu.alloc(m, n);
  activation cy = cpu.alloc(m, n);
  gpu.matmul(xt.gpu, *gpu_w, with_bias ? static_cast<const float*>(gpu_bias->data()) : nullptr,
             gy.view());
  cpu.matmul(xt.cpu, *cpu_w, with_bias ? static_cast<const float*>(cpu_bias->data()) : nullptr,
             cy.view());
  const std::vector<float> got = to_host(gpu, gy.view());
  const std::vector<float> cpu_got = cpu_host(cpu, cy.view());
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) {
      const float* xr = x.data() + static_cast<size_t>(r) * k;
      const float* wr = w.widened.data() + static_cast<size_t>(c) * k;
      float expected = cuda::canonical_dot(xr, wr, k);
      if (with_bias) expected = expected + bias[static_cast<size_t>(c)];
      double exact = with_bias ? bias[static_cast<size_t>(c)] : 0.0;
      double magnitude = with_bias ? std::fabs(bias[static_cast<size_t>(c)]) : 0.0;
      for (int i = 0; i < k; ++i) {
        exact += static_cast<double>(xr[i]) * wr[i];
        magnitude += std::fabs(static_cast<double>(xr[i]) * wr[i]);
      }
      const size_t at = static_cast<size_t>(r) * n + c;
      INFO("row " << r << " col " << c << ": gpu " << got[at] << ", canonical " << expected
                  << ", cpu " << cpu_got[at] << ", exact " << exact);
      REQUIRE(std::memcmp(&got[at], &expected, sizeof(float)) == 0);
      // Both are float sums of k + 1 terms: each within (k + 1) units of 2^-24 of the
      // magnitude from the exact value.
      const double bound = (k + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      REQUIRE(std::fabs(got[at] - exact) <= bound);
      REQUIRE(std::fabs(cpu_got[at] - got[at]) <= 2 * bound);
    }
  }
}

}  // namespace

TEST_CASE("probe_cuda lists the devices or says why there are none", "[cuda]") {
  const device_report r = probe_cuda();
  CHECK(r.built_with_cuda);
  if (r.devices.empty()) {
    CHECK_FALSE(r.reason.empty());
    auto dev = make_cuda_backend(0);
    REQUIRE_FALSE(dev.ok());
    CHECK(dev.err().code == errc::unavailable);
  } else {
    CHECK(r.reason.empty());
    for (const device_info& d : r.devices)
      CHECK_FALSE(d.name.empty());
    auto missing = make_cuda_backend(r.count());
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.err().code == errc::not_found);
    auto negative = make_cuda_backend(-1);
    CHECK_FALSE(negative.ok());
  }
}

TEST_CASE("cuda upload and download round-trip strided tensors", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  std::mt19937 rng(11);
  const std::vector<float> host = random_floats(rng, 7 * 13);
  activation wide = gpu->alloc(7, 20);
  const tensor window = wide.view().cols_view(3, 13);
  gpu->upload(host.data(), window);
  require_identical(to_host(*gpu, window), host);
  // Columns outside the window keep the zeros alloc() gave them.
  const std::vector<float> all = to_host(*gpu, wide.view());
  for (int r = 0; r < 7; ++r) {
    for (int c = 0; c < 3; ++c)
      REQUIRE(all[static_cast<size_t>(r) * 20 + c] == 0.0f);
  }
}

TEST_CASE("cuda read_matrix returns the bytes a matrix was made from", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  std::mt19937 rng(12);
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (auto [rows, cols] : {std::pair{1, 1}, {17, 9}, {64, 130}}) {
      INFO(dtype_name(type) << " rows " << rows << " cols " << cols);
      const random_weights a = make_weights(rng, type, rows, cols);
      const random_weights b = make_weights(rng, type, 3, cols);
      auto m = gpu->make_stacked_matrix({a.view, b.view});
      std::vector<unsigned char> back(static_cast<size_t>(rows + 3) * cols * dtype_size(type));
      gpu->read_matrix(*m, back.data());
      std::vector<unsigned char> expected = a.bytes;
      expected.insert(expected.end(), b.bytes.begin(), b.bytes.end());
      REQUIRE(back == expected);
    }
  }
}

TEST_CASE("cuda matmul follows the canonical order and matches the CPU", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  struct shape {
    int m, n, k;
  };
  const shape shapes[] = {{1, 1, 1},    {1, 33, 7},      {2, 16, 8},     {3, 50, 100},
                          {5, 17, 257}, {64, 130, 1000}, {17, 64, 2048}, {4, 3, 4095}};
  uint32_t seed = 100;
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (const shape& s : shapes) {
      check_matmul(*gpu, *cpu, type, s.m, s.n, s.k, seed % 2 == 0, 0, seed);
      ++seed;
      check_matmul(*gpu, *cpu, type, s.m, s.n, s.k, seed % 2 == 0, 1, seed);
      ++seed;
    }
  }
}

TEST_CASE("cuda grouped matmul gives each product the bits of its own launch", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  struct shape {
    int m, n, k;
  };
  // A decode step's experts (one row each), and mixed heights (the tile height the largest's).
  const std::vector<std::vector<shape>> groups = {{{1, 64, 128}, {1, 48, 128}, {1, 64, 128}},
                                                  {{3, 33, 257}, {1, 50, 257}, {9, 16, 257}},
                                                  {{2, 20, 96}, {1, 20, 96}, {4, 7, 96}}};
  uint32_t seed = 160;
  for (dtype type : {dtype::bf16, dtype::f32}) {
    for (const std::vector<shape>& group : groups) {
      INFO("seed " << seed << ", " << dtype_name(type) << ", " << group.size() << " jobs");
      std::mt19937 rng(seed++);
      std::vector<random_weights> ws;
      std::vector<std::unique_ptr<matrix>> matrices;
      std::vector<twin> xs;
      std::vector<activation> together, alone;
      std::vector<matmul_job> jobs;
      for (const shape& g : group) {
        ws.push_back(make_weights(rng, type, g.n, g.k));
        matrices.push_back(gpu->make_matrix(ws.back().view));
        xs.push_back(make_twin(*cpu, *gpu, random_floats(rng, static_cast<size_t>(g.m) * g.k), g.m,
                               g.k, 1, 1));
        together.push_back(gpu->alloc(g.m, g.n));
        alone.push_back(gpu->alloc(g.m, g.n));
      }
      for (size_t j = 0; j < group.size(); ++j)
        jobs.push_back({xs[j].gpu, matrices[j].get(), together[j].view()});
      gpu->grouped_matmul(jobs.data(), jobs.size());
      for (size_t j = 0; j < group.size(); ++j) {
        INFO("job " << j);
        gpu->matmul(xs[j].gpu, *matrices[j], nullptr, alone[j].view());
        require_identical(to_host(*gpu, together[j].view()), to_host(*gpu, alone[j].view()));
      }
    }
  }
}

TEST_CASE("cuda rms_norm matches the CPU for whole rows, groups, strides and in place", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  for (int group : {256, 64, 100}) {
    for (bool in_place : {false, true}) {
      const int rows = 9;
      const int cols = group == 100 ? 300 : 256;
      const uint32_t seed = 200 + static_cast<uint32_t>(group) + (in_place ? 1 : 0);
      INFO("seed " << seed << ", group " << group << ", in place " << in_place);
      std::mt19937 rng(seed);
      const std::vector<float> x = random_floats(rng, static_cast<size_t>(rows) * cols, -3, 3);
      const std::vector<float> weight = random_floats(rng, static_cast<size_t>(group), 0.5f, 1.5f);
      twin xt = make_twin(*cpu, *gpu, x, rows, cols, 5, 3);
      auto gw = gpu->make_vector(weight.data(), weight.size());
      auto cw = cpu->make_vector(weight.data(), weight.size());
      activation gy = gpu->alloc(rows, cols);
      activation cy = cpu->alloc(rows, cols);
      const tensor gout = in_place ? xt.gpu : gy.view();
      const tensor cout = in_place ? xt.cpu : cy.view();
      gpu->rms_norm(xt.gpu, static_cast<const float*>(gw->data()), group, 1e-6f, gout);
      cpu->rms_norm(xt.cpu, static_cast<const float*>(cw->data()), group, 1e-6f, cout);
      const std::vector<float> got = to_host(*gpu, gout);
      const std::vector<float> want = cpu_host(*cpu, cout);
      // Inputs are O(1) after the norm; two float orders of a sum of squares differ by a few
      // units in the last place of the scale.
      REQUIRE(max_abs_diff(got, want) <= 2e-5f);
    }
  }
}

TEST_CASE("cuda rope equals the CPU bit for bit", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int rows = 11, heads = 3, head_dim = 64, max_positions = 300, half = head_dim / 2;
  std::mt19937 rng(300);
  INFO("seed 300");
  std::vector<float> cos_t(static_cast<size_t>(max_positions) * half);
  std::vector<float> sin_t(cos_t.size());
  for (int p = 0; p < max_positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / head_dim);
      cos_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  std::vector<int32_t> positions(rows);
  for (int32_t& p : positions)
    p = static_cast<int32_t>(rng() % max_positions);
  // A q block inside a wider qkv row: rope touches only the first heads * head_dim columns.
  const int cols = heads * head_dim + 40;
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(rows) * cols);
  twin xt = make_twin(*cpu, *gpu, x, rows, cols);
  auto gc = gpu->make_vector(cos_t.data(), cos_t.size());
  auto gs = gpu->make_vector(sin_t.data(), sin_t.size());
  gpu->rope(xt.gpu, positions.data(), heads, head_dim, static_cast<const float*>(gc->data()),
            static_cast<const float*>(gs->data()));
  cpu->rope(xt.cpu, positions.data(), heads, head_dim, cos_t.data(), sin_t.data());
  require_identical(to_host(*gpu, xt.gpu), cpu_host(*cpu, xt.cpu));
}

TEST_CASE("cuda silu_mul, add and clamp match the CPU", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int rows = 13, inter = 200;
  std::mt19937 rng(400);
  INFO("seed 400");
  const std::vector<float> gate_up =
      random_floats(rng, static_cast<size_t>(rows) * 2 * inter, -6, 6);
  twin gu = make_twin(*cpu, *gpu, gate_up, rows, 2 * inter);
  activation go = gpu->alloc(rows, inter);
  activation co = cpu->alloc(rows, inter);
  gpu->silu_mul(gu.gpu, go.view());
  cpu->silu_mul(gu.cpu, co.view());
  const std::vector<float> got = to_host(*gpu, go.view());
  const std::vector<float> want = cpu_host(*cpu, co.view());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    // expf is within 2 ulp on the GPU; the division and product add one rounding each.
    REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * std::max(1.0f, std::fabs(want[i])));
  }

  const std::vector<float> a = random_floats(rng, static_cast<size_t>(rows) * inter, -2, 2);
  const std::vector<float> b = random_floats(rng, static_cast<size_t>(rows) * inter, -2, 2);
  twin at = make_twin(*cpu, *gpu, a, rows, inter, 1, 1);
  twin bt = make_twin(*cpu, *gpu, b, rows, inter);
  gpu->add(at.gpu, bt.gpu);
  cpu->add(at.cpu, bt.cpu);
  require_identical(to_host(*gpu, at.gpu), cpu_host(*cpu, at.cpu));
  gpu->clamp(at.gpu, 1.25f);
  cpu->clamp(at.cpu, 1.25f);
  require_identical(to_host(*gpu, at.gpu), cpu_host(*cpu, at.cpu));
}

TEST_CASE("cuda gather_rows, scatter_rows and embed copy exactly", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  std::mt19937 rng(500);
  INFO("seed 500");
  const int rows = 20, cols = 37;
  const std::vector<float> src = random_floats(rng, static_cast<size_t>(rows) * cols);
  twin st = make_twin(*cpu, *gpu, src, rows, cols, 2, 0);
  std::vector<int32_t> picks = {19, 0, 7, 7, 3, 12};
  activation gd = gpu->alloc(static_cast<int>(picks.size()), cols);
  activation cd = cpu->alloc(static_cast<int>(picks.size()), cols);
  gpu->gather_rows(st.gpu, picks.data(), gd.view());
  cpu->gather_rows(st.cpu, picks.data(), cd.view());
  require_identical(to_host(*gpu, gd.view()), cpu_host(*cpu, cd.view()));

  std::vector<int32_t> targets = {4, 30, 0, 17, 29, 8};
  activation gs = gpu->alloc(32, cols);
  activation cs = cpu->alloc(32, cols);
  gpu->scatter_rows(gd.view(), targets.data(), gs.view());
  cpu->scatter_rows(cd.view(), targets.data(), cs.view());
  require_identical(to_host(*gpu, gs.view()), cpu_host(*cpu, cs.view()));

  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    INFO(dtype_name(type));
    const random_weights table = make_weights(rng, type, 50, 43);
    auto gt = gpu->make_matrix(table.view);
    auto ct = cpu->make_matrix(table.view);
    std::vector<int32_t> ids = {49, 0, 3, 3, 25, 48, 1};
    activation ge = gpu->alloc(static_cast<int>(ids.size()), 43);
    activation ce = cpu->alloc(static_cast<int>(ids.size()), 43);
    gpu->embed(*gt, ids.data(), ge.view());
    cpu->embed(*ct, ids.data(), ce.view());
    require_identical(to_host(*gpu, ge.view()), cpu_host(*cpu, ce.view()));
  }
}

namespace {

// Router logits of distinct values 0.05 apart in a shuffled order per row: no two scores close
// enough for the device's expf to order them unlike the CPU's exp. The last three rows are all
// ties.
std::vector<float> spaced_router_logits(std::mt19937& rng, int rows, int experts) {
  std::vector<float> logits(static_cast<size_t>(rows) * experts);
  std::vector<int> order(experts);
  for (int r = 0; r < rows; ++r) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < experts; ++i) {
      const float v = r >= rows - 3 ? 0.25f : 0.05f * static_cast<float>(order[i] - experts / 2);
      logits[static_cast<size_t>(r) * experts + i] = v;
    }
  }
  return logits;
}

}  // namespace

TEST_CASE("cuda router_topk picks the CPU's experts, ties to the lower index", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int rows = 40, experts = 64;
  std::mt19937 rng(600);
  INFO("seed 600");
  const std::vector<float> logits = spaced_router_logits(rng, rows, experts);
  twin lt = make_twin(*cpu, *gpu, logits, rows, experts, 3, 0);
  for (int k : {1, 4, 8}) {
    for (bool normalize : {true, false}) {
      INFO("top_k " << k << ", normalize " << normalize);
      const router_spec spec{k, normalize};
      const size_t slots = static_cast<size_t>(rows) * k;
      std::vector<int32_t> ge(slots), ce(slots);
      std::vector<float> gw(slots), cw(slots);
      gpu->router_topk(lt.gpu, spec, ge.data(), gw.data());
      cpu->router_topk(lt.cpu, spec, ce.data(), cw.data());
      REQUIRE(ge == ce);
      for (size_t i = 0; i < slots; ++i)
        REQUIRE(std::fabs(gw[i] - cw[i]) <= 1e-6f);
      for (int j = 0; j < k; ++j)
        REQUIRE(ge[(rows - 1) * static_cast<size_t>(k) + j] == j);
    }
  }
}

TEST_CASE("cuda sigmoid router picks the CPU's experts in the kept groups", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int rows = 40, experts = 64;
  std::mt19937 rng(610);
  INFO("seed 610");
  // A bias in steps of 0.0037 keeps the biased scores apart too.
  const std::vector<float> logits = spaced_router_logits(rng, rows, experts);
  std::vector<float> bias(experts);
  for (int i = 0; i < experts; ++i)
    bias[static_cast<size_t>(i)] = 0.0037f * static_cast<float>((i * 37) % experts);
  twin lt = make_twin(*cpu, *gpu, logits, rows, experts, 3, 0);
  struct shape {
    int k, groups, top_groups;
    bool normalize;
    const float* bias;
    float scale;
  };
  for (const shape& c :
       {shape{8, 8, 4, true, bias.data(), 2.5f}, shape{4, 1, 1, false, nullptr, 1.0f},
        shape{6, 16, 3, true, bias.data(), 1.0f}}) {
    INFO("top_k " << c.k << ", groups " << c.groups << " keeping " << c.top_groups);
    router_spec spec;
    spec.top_k = c.k;
    spec.normalize = c.normalize;
    spec.sigmoid = true;
    spec.host_bias = c.bias;
    spec.groups = c.groups;
    spec.top_groups = c.top_groups;
    spec.scale = c.scale;
    const size_t slots = static_cast<size_t>(rows) * c.k;
    std::vector<int32_t> ge(slots), ce(slots);
    std::vector<float> gw(slots), cw(slots);
    gpu->router_topk(lt.gpu, spec, ge.data(), gw.data());
    cpu->router_topk(lt.cpu, spec, ce.data(), cw.data());
    REQUIRE(ge == ce);
    for (size_t i = 0; i < slots; ++i)
      REQUIRE(std::fabs(gw[i] - cw[i]) <= 1e-6f * std::max(1.0f, c.scale));
  }
}

TEST_CASE("cuda combine matches the CPU with and without a shared expert and its gate", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  auto cpu = make_cpu_backend();
  const int tokens = 6, cols = 48, k = 3;
  std::mt19937 rng(700);
  INFO("seed 700");
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(tokens) * cols);
  const std::vector<float> y = random_floats(rng, static_cast<size_t>(tokens) * k * cols);
  const std::vector<float> shared = random_floats(rng, static_cast<size_t>(tokens) * cols);
  const std::vector<float> gate = random_floats(rng, static_cast<size_t>(tokens), -3, 3);
  const std::vector<float> weights = random_floats(rng, static_cast<size_t>(tokens) * k, 0, 1);
  twin yt = make_twin(*cpu, *gpu, y, tokens * k, cols);
  twin st = make_twin(*cpu, *gpu, shared, tokens, cols, 1, 0);
  twin gt = make_twin(*cpu, *gpu, gate, tokens, 1, 2, 1);

  twin plain = make_twin(*cpu, *gpu, x, tokens, cols);
  gpu->combine(plain.gpu, yt.gpu, weights.data(), k, nullptr, nullptr);
  cpu->combine(plain.cpu, yt.cpu, weights.data(), k, nullptr, nullptr);
  require_identical(to_host(*gpu, plain.gpu), cpu_host(*cpu, plain.cpu));

  twin with_shared = make_twin(*cpu, *gpu, x, tokens, cols);
  gpu->combine(with_shared.gpu, yt.gpu, weights.data(), k, &st.gpu, &gt.gpu);
  cpu->combine(with_shared.cpu, yt.cpu, weights.data(), k, &st.cpu, &gt.cpu);
  // Only the sigmoid's expf differs from the CPU's exp.
  REQUIRE(max_abs_diff(to_host(*gpu, with_shared.gpu), cpu_host(*cpu, with_shared.cpu)) <= 2e-6f);

  // A shared expert without a gate (DeepSeek-V3's) adds at a scale of one: exact.
  twin ungated = make_twin(*cpu, *gpu, x, tokens, cols);
  gpu->combine(ungated.gpu, yt.gpu, weights.data(), k, &st.gpu, nullptr);
  cpu->combine(ungated.cpu, yt.cpu, weights.data(), k, &st.cpu, nullptr);
  require_identical(to_host(*gpu, ungated.gpu), cpu_host(*cpu, ungated.cpu));
}

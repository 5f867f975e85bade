#include "bench/engine_measure.hpp"

#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "model/engine.hpp"

namespace brigade::bench {

ffn_figures measure_ffn(int rows, int hidden, int inter, thread_pool& pool,
                        gpu::cpu::kernel_path path, const openblas* blas) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  auto fill = [&](std::vector<float>& v) {
    for (auto& x : v)
      x = normal(rng);
  };
  std::vector<float> w_gate_up(static_cast<size_t>(2 * inter) * hidden),
      w_down(static_cast<size_t>(hidden) * inter);
  std::vector<float> x(static_cast<size_t>(rows) * hidden);
  fill(w_gate_up);
  fill(w_down);
  fill(x);
  std::vector<uint16_t> gu16(w_gate_up.size()), down16(w_down.size());
  for (size_t i = 0; i < gu16.size(); ++i)
    gu16[i] = gpu::f32_to_bf16(w_gate_up[i]);
  for (size_t i = 0; i < down16.size(); ++i)
    down16[i] = gpu::f32_to_bf16(w_down[i]);
  auto gu_f32 =
      gpu::cpu::packed_matrix::pack({{w_gate_up.data(), gpu::dtype::f32, 2 * inter, hidden}});
  auto dn_f32 = gpu::cpu::packed_matrix::pack({{w_down.data(), gpu::dtype::f32, hidden, inter}});
  auto gu_b16 = gpu::cpu::packed_matrix::pack({{gu16.data(), gpu::dtype::bf16, 2 * inter, hidden}});
  auto dn_b16 = gpu::cpu::packed_matrix::pack({{down16.data(), gpu::dtype::bf16, hidden, inter}});
  std::vector<float> gate_up(static_cast<size_t>(rows) * 2 * inter),
      act(static_cast<size_t>(rows) * inter), out(static_cast<size_t>(rows) * hidden);
  auto silu = [&] {
    for (int r = 0; r < rows; ++r) {
      const float* g = &gate_up[static_cast<size_t>(r) * 2 * inter];
      for (int i = 0; i < inter; ++i) {
        act[static_cast<size_t>(r) * inter + i] = g[i] / (1.0f + std::exp(-g[i])) * g[inter + i];
      }
    }
  };
  auto ours = [&](const gpu::cpu::packed_matrix& gu, const gpu::cpu::packed_matrix& dn) {
    gpu::cpu::gemm(x.data(), hidden, rows, gu, nullptr, gate_up.data(), 2 * inter, pool, path);
    silu();
    gpu::cpu::gemm(act.data(), inter, rows, dn, nullptr, out.data(), hidden, pool, path);
  };
  auto run_blas = [&] {
    blas->sgemm_nt(rows, 2 * inter, hidden, x.data(), w_gate_up.data(), gate_up.data());
    silu();
    blas->sgemm_nt(rows, hidden, inter, act.data(), w_down.data(), out.data());
  };
  const double flops = 2.0 * rows * hidden * (2.0 * inter) + 2.0 * rows * inter * hidden;
  ffn_figures f{rows, 0, 0, 0};
  f.ours_bf16_gflops = flops / best_time([&] { ours(*gu_b16, *dn_b16); }) / 1e9;
  f.ours_f32_gflops = flops / best_time([&] { ours(*gu_f32, *dn_f32); }) / 1e9;
  if (blas) f.openblas_gflops = flops / best_time(run_blas) / 1e9;
  return f;
}

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::vector<int32_t> bench_prompt(int n, int seed, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back((seed * 7919 + i * 104729) % vocab);
  return p;
}

}  // namespace

double prefill_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int tokens,
                            int trials) {
  model::engine_options opt;
  opt.max_step_tokens = tokens;
  opt.kv_tokens = tokens + 64;
  double best = 1e30;
  for (int trial = 0; trial < trials; ++trial) {
    model::engine eng(m, dev, opt);
    model::request_options req;
    req.max_tokens = 1;
    (void)eng.submit(bench_prompt(tokens, trial, m.config.vocab_size), req);
    std::vector<model::token_event> ev;
    const auto start = clock_type::now();
    eng.step(ev);
    best = std::min(best, seconds_since(start));
  }
  return tokens / best;
}

double decode_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int batch, int steps,
                           int prompt_tokens, gpu::dtype kv) {
  model::engine_options opt;
  opt.max_running = batch;
  opt.max_step_tokens = std::max(batch, 256);
  opt.kv_dtype = kv;
  // Every sequence must fit at once: whole blocks of prompt + generated tokens each.
  const int per_seq =
      (prompt_tokens + steps + 2 + opt.block_tokens - 1) / opt.block_tokens * opt.block_tokens;
  opt.kv_tokens = batch * per_seq;
  model::engine eng(m, dev, opt);
  model::request_options req;
  req.max_tokens = steps + 2;
  for (int b = 0; b < batch; ++b)
    (void)eng.submit(bench_prompt(prompt_tokens, b, m.config.vocab_size), req);
  std::vector<model::token_event> ev;
  // Prefill until every sequence produced its first token, then time pure decode steps.
  std::set<int64_t> started;
  while (static_cast<int>(started.size()) < batch) {
    ev.clear();
    if (!eng.step(ev)) return 0.0;
    for (const auto& e : ev)
      started.insert(e.request);
  }
  const auto start = clock_type::now();
  for (int s = 0; s < steps; ++s) {
    ev.clear();
    eng.step(ev);
  }
  return static_cast<double>(batch) * steps / seconds_since(start);
}

double pool_handoff_us(thread_pool& pool) {
  // As many chunks as the pool makes of a large job (4 a thread), each empty: what is left is
  // publishing the job, workers claiming chunks and the caller waiting for them. The mean over
  // many calls, not the best: contention between caller and workers is what it measures.
  const size_t chunks = 4 * static_cast<size_t>(pool.size());
  const std::function<void(size_t, size_t)> nothing = [](size_t, size_t) {};
  std::vector<double> means;
  for (int trial = 0; trial < 5; ++trial) {
    constexpr int calls = 20000;
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c)
      pool.parallel_for(chunks, 1, nothing);
    means.push_back(
        1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        calls);
  }
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

}  // namespace brigade::bench

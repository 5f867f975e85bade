// `brigade bench engine`: the single-process engine's prefill and decode speed, the expert FFN
// kernel beside OpenBLAS sgemm on the same shapes, and decode at batch 1 beside the memory
// bandwidth bound, all measured in one run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "bench/engine_model.hpp"
#include "bench/openblas_loader.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "model/engine.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Runs fn repeatedly for at least min_s and returns the best seconds per call of `trials` trials.
template <class F>
double best_time(F&& fn, double min_s = 0.05, int trials = 5) {
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    int calls = 0;
    const auto start = clock_type::now();
    do {
      fn();
      ++calls;
    } while (seconds_since(start) < min_s);
    best = std::min(best, seconds_since(start) / calls);
  }
  return best;
}

struct ffn_figures {
  int rows;
  double ours_bf16_gflops, ours_f32_gflops, openblas_gflops;
};

// The expert FFN on `rows` tokens: our kernel (bf16 and f32 weights) beside OpenBLAS sgemm.
ffn_figures measure_ffn(int rows, int hidden, int inter, thread_pool& pool,
                        const openblas& blas_lib) {
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
    gpu::cpu::gemm(x.data(), hidden, rows, gu, nullptr, gate_up.data(), 2 * inter, pool);
    silu();
    gpu::cpu::gemm(act.data(), inter, rows, dn, nullptr, out.data(), hidden, pool);
  };
  auto blas = [&] {
    blas_lib.sgemm_nt(rows, 2 * inter, hidden, x.data(), w_gate_up.data(), gate_up.data());
    silu();
    blas_lib.sgemm_nt(rows, hidden, inter, act.data(), w_down.data(), out.data());
  };
  const double flops = 2.0 * rows * hidden * (2.0 * inter) + 2.0 * rows * inter * hidden;
  ffn_figures f{rows, 0, 0, 0};
  f.ours_bf16_gflops = flops / best_time([&] { ours(*gu_b16, *dn_b16); }) / 1e9;
  f.ours_f32_gflops = flops / best_time([&] { ours(*gu_f32, *dn_f32); }) / 1e9;
  f.openblas_gflops = flops / best_time(blas) / 1e9;
  return f;
}

// Copy bandwidth of this machine with all pool threads: bytes copied per second.
double copy_bandwidth(thread_pool& pool) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const size_t chunk = size_t{4} << 20;
  const double t = best_time(
      [&] {
        pool.parallel_for(bytes / chunk, 1, [&](size_t b, size_t e) {
          std::memcpy(&dst[b * chunk], &src[b * chunk], (e - b) * chunk);
        });
      },
      0.2, 3);
  return static_cast<double>(bytes) / t;
}

// Weight bytes one decode token reads: attention, router, top-k experts, shared expert, lm_head.
double active_weight_bytes(const model::loaded_model& m) {
  const model::model_config& c = m.config;
  double bytes = static_cast<double>(m.dense->output_matrix().bytes());
  for (int l = 0; l < c.num_layers; ++l) {
    const model::layer_weights& lw = m.dense->layers[static_cast<size_t>(l)];
    bytes += static_cast<double>(lw.attn.qkv->bytes() + lw.attn.o->bytes());
    if (!c.is_moe_layer(l)) {
      bytes += static_cast<double>(lw.dense.bytes());
      continue;
    }
    bytes += static_cast<double>(lw.router->bytes() + lw.shared.bytes());
    bytes += c.top_k * static_cast<double>(m.experts->find(l, 0)->bytes());
  }
  return bytes;
}

std::vector<int32_t> bench_prompt(int n, int seed, int vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back((seed * 7919 + i * 104729) % vocab);
  return p;
}

// Prefill tokens per second of one `tokens`-long prompt in a single step.
double prefill_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int tokens) {
  model::engine_options opt;
  opt.max_step_tokens = tokens;
  opt.kv_tokens = tokens + 64;
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
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

// Decode tokens per second with `batch` sequences decoding together.
double decode_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int batch, int steps) {
  model::engine_options opt;
  opt.max_running = batch;
  opt.max_step_tokens = std::max(batch, 256);
  // Every sequence must fit at once: whole blocks of prompt + generated tokens each.
  const int per_seq = (32 + steps + 2 + opt.block_tokens - 1) / opt.block_tokens * opt.block_tokens;
  opt.kv_tokens = batch * per_seq;
  model::engine eng(m, dev, opt);
  model::request_options req;
  req.max_tokens = steps + 2;
  for (int b = 0; b < batch; ++b)
    (void)eng.submit(bench_prompt(32, b, m.config.vocab_size), req);
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

}  // namespace

int engine(int argc, char** argv) {
  bool as_json = false, quick = false;
  std::string work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
  CLI::App app{"Engine throughput and kernel speed beside OpenBLAS", "brigade bench engine"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--quick", quick, "fewer steps (for smoke tests)");
  bool kernel_only = false;
  app.add_flag("--kernel-only", kernel_only, "measure only the expert FFN kernel beside OpenBLAS");
  app.add_option("--work-dir", work_dir, "where the generated benchmark model is kept")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  thread_pool& pool = thread_pool::shared();
  auto blas_lib = load_openblas();
  if (!blas_lib) return std::fprintf(stderr, "%s\n", blas_lib.err().message.c_str()), 1;
  blas_lib->set_threads(pool.size());
  const model::model_spec spec = engine_model_spec();
  auto dev = gpu::make_cpu_backend(&pool);
  auto loaded = load_engine_model(work_dir, *dev);
  if (!loaded) return std::fprintf(stderr, "%s\n", loaded.err().message.c_str()), 1;
  const model::loaded_model& m = *loaded.value();

  std::fprintf(stderr, "measuring the expert FFN kernel ...\n");
  std::vector<ffn_figures> ffn;
  for (int rows : {8, 32, 128, 512})
    ffn.push_back(measure_ffn(rows, spec.hidden, spec.moe_inter, pool, blas_lib.value()));
  if (kernel_only) {
    for (const auto& f : ffn) {
      std::printf("rows %4d: ours bf16 %6.1f, f32 %6.1f, OpenBLAS %6.1f GFLOP/s (%.2fx, %.2fx)\n",
                  f.rows, f.ours_bf16_gflops, f.ours_f32_gflops, f.openblas_gflops,
                  f.ours_bf16_gflops / f.openblas_gflops, f.ours_f32_gflops / f.openblas_gflops);
    }
    return 0;
  }
  std::fprintf(stderr, "measuring prefill and decode ...\n");
  const double prefill = prefill_tokens_per_s(m, *dev, 512);
  const int steps = quick ? 8 : 32;
  std::vector<std::pair<int, double>> decode;
  for (int b : {1, 8, 32})
    decode.emplace_back(b, decode_tokens_per_s(m, *dev, b, steps));
  const double bandwidth = copy_bandwidth(pool);
  const double active = active_weight_bytes(m);
  const double bound_tokens_per_s = bandwidth / active;
  const double batch1_ratio = bound_tokens_per_s / decode[0].second;

  json j;
  j["model"] = {{"params", m.config.total_params()},
                {"active_params", m.config.active_params()},
                {"experts", m.config.num_experts},
                {"top_k", m.config.top_k},
                {"dtype", spec.dtype}};
  j["threads"] = pool.size();
  j["prefill_tokens_per_s"] = prefill;
  for (const auto& [b, tps] : decode)
    j["decode_tokens_per_s"][std::to_string(b)] = tps;
  for (const auto& f : ffn) {
    j["expert_ffn"].push_back({{"rows", f.rows},
                               {"ours_bf16_gflops", f.ours_bf16_gflops},
                               {"ours_f32_gflops", f.ours_f32_gflops},
                               {"openblas_f32_gflops", f.openblas_gflops},
                               {"ratio_bf16", f.ours_bf16_gflops / f.openblas_gflops},
                               {"ratio_f32", f.ours_f32_gflops / f.openblas_gflops}});
  }
  j["copy_bandwidth_gb_per_s"] = bandwidth / 1e9;
  j["active_weight_bytes_per_token"] = active;
  j["decode_batch1_bound_tokens_per_s"] = bound_tokens_per_s;
  j["decode_batch1_over_bound"] = batch1_ratio;
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %.0fM parameters (%.1fM active), %d experts top-%d, %s, %d threads\n\n",
              m.config.total_params() / 1e6, m.config.active_params() / 1e6, m.config.num_experts,
              m.config.top_k, spec.dtype.c_str(), pool.size());
  table kernel({"expert FFN rows", "ours bf16 GFLOP/s", "ours f32 GFLOP/s", "OpenBLAS f32 GFLOP/s",
                "bf16/OpenBLAS", "f32/OpenBLAS"});
  for (const auto& f : ffn) {
    kernel.add_row({std::to_string(f.rows), fixed(f.ours_bf16_gflops, 1),
                    fixed(f.ours_f32_gflops, 1), fixed(f.openblas_gflops, 1),
                    fixed(f.ours_bf16_gflops / f.openblas_gflops, 2),
                    fixed(f.ours_f32_gflops / f.openblas_gflops, 2)});
  }
  std::printf("%s\n", kernel.render().c_str());
  table speed({"phase", "tokens/s"});
  speed.add_row({"prefill (512-token prompt)", fixed(prefill, 0)});
  for (const auto& [b, tps] : decode)
    speed.add_row({"decode batch " + std::to_string(b), fixed(tps, 1)});
  std::printf("%s\n", speed.render().c_str());
  std::printf(
      "decode batch 1: %.1f tokens/s; bound %.1f tokens/s (%.1f MB of weights per token at "
      "%.1f GB/s copy bandwidth): %.2fx the bound (goal <= 2)\n",
      decode[0].second, bound_tokens_per_s, active / 1e6, bandwidth / 1e9, batch1_ratio);
  return 0;
}

}  // namespace brigade::bench

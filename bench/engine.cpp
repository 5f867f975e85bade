// `brigade bench engine`: the single-process engine's prefill and decode speed, the expert FFN
// kernel beside OpenBLAS sgemm on the same shapes, and decode at batch 1 beside the memory
// bandwidth bound, all measured in one run on one CPU kernel path; with --compare-paths, every
// kernel path this machine has, side by side (engine_paths.hpp).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/engine_paths.hpp"
#include "bench/openblas_loader.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using json = nlohmann::json;

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

// What one run on one kernel path measured.
struct engine_figures {
  gpu::cpu::kernel_path path = gpu::cpu::kernel_path::avx2;
  std::vector<ffn_figures> ffn;
  double prefill_tokens_per_s = 0;
  std::vector<std::pair<int, double>> decode_tokens_per_s;  // (batch, tokens/s)
  double bandwidth = 0;                                     // bytes copied per second
  double active_bytes = 0;                                  // weight bytes per decode token
};

json figures_json(const model::loaded_model& m, const model::model_spec& spec,
                  const engine_figures& f, int threads) {
  json j;
  j["model"] = {{"params", m.config.total_params()},
                {"active_params", m.config.active_params()},
                {"experts", m.config.num_experts},
                {"top_k", m.config.top_k},
                {"dtype", spec.dtype}};
  j["threads"] = threads;
  j["kernel_path"] = gpu::cpu::kernel_path_name(f.path);
  for (gpu::cpu::kernel_path p : gpu::cpu::available_kernel_paths())
    j["kernel_paths_available"].push_back(gpu::cpu::kernel_path_name(p));
  j["prefill_tokens_per_s"] = f.prefill_tokens_per_s;
  for (const auto& [b, tps] : f.decode_tokens_per_s)
    j["decode_tokens_per_s"][std::to_string(b)] = tps;
  for (const auto& e : f.ffn) {
    j["expert_ffn"].push_back({{"rows", e.rows},
                               {"ours_bf16_gflops", e.ours_bf16_gflops},
                               {"ours_f32_gflops", e.ours_f32_gflops},
                               {"openblas_f32_gflops", e.openblas_gflops},
                               {"ratio_bf16", e.ours_bf16_gflops / e.openblas_gflops},
                               {"ratio_f32", e.ours_f32_gflops / e.openblas_gflops}});
  }
  const double bound_tokens_per_s = f.bandwidth / f.active_bytes;
  j["copy_bandwidth_gb_per_s"] = f.bandwidth / 1e9;
  j["active_weight_bytes_per_token"] = f.active_bytes;
  j["decode_batch1_bound_tokens_per_s"] = bound_tokens_per_s;
  j["decode_batch1_over_bound"] = bound_tokens_per_s / f.decode_tokens_per_s[0].second;
  return j;
}

void print_figures(const model::loaded_model& m, const model::model_spec& spec,
                   const engine_figures& f, int threads) {
  std::printf("model: %.0fM parameters (%.1fM active), %d experts top-%d, %s, %d threads\n",
              m.config.total_params() / 1e6, m.config.active_params() / 1e6, m.config.num_experts,
              m.config.top_k, spec.dtype.c_str(), threads);
  std::printf("CPU kernel path: %s\n\n", gpu::cpu::describe_kernel_paths(f.path).c_str());
  table kernel({"expert FFN rows", "ours bf16 GFLOP/s", "ours f32 GFLOP/s", "OpenBLAS f32 GFLOP/s",
                "bf16/OpenBLAS", "f32/OpenBLAS"});
  for (const auto& e : f.ffn) {
    kernel.add_row({std::to_string(e.rows), fixed(e.ours_bf16_gflops, 1),
                    fixed(e.ours_f32_gflops, 1), fixed(e.openblas_gflops, 1),
                    fixed(e.ours_bf16_gflops / e.openblas_gflops, 2),
                    fixed(e.ours_f32_gflops / e.openblas_gflops, 2)});
  }
  std::printf("%s\n", kernel.render().c_str());
  table speed({"phase", "tokens/s"});
  speed.add_row({"prefill (512-token prompt)", fixed(f.prefill_tokens_per_s, 0)});
  for (const auto& [b, tps] : f.decode_tokens_per_s)
    speed.add_row({"decode batch " + std::to_string(b), fixed(tps, 1)});
  std::printf("%s\n", speed.render().c_str());
  const double bound_tokens_per_s = f.bandwidth / f.active_bytes;
  const double batch1 = f.decode_tokens_per_s[0].second;
  std::printf(
      "decode batch 1: %.1f tokens/s; bound %.1f tokens/s (%.1f MB of weights per token at "
      "%.1f GB/s copy bandwidth): %.2fx the bound (goal <= 2)\n",
      batch1, bound_tokens_per_s, f.active_bytes / 1e6, f.bandwidth / 1e9,
      bound_tokens_per_s / batch1);
}

}  // namespace

int engine(int argc, char** argv) {
  bool as_json = false, quick = false, kernel_only = false, compare = false;
  std::string work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
  std::string kernels;
  path_comparison_options cmp;
  CLI::App app{"Engine throughput and kernel speed beside OpenBLAS", "brigade bench engine"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--quick", quick, "fewer steps (for smoke tests)");
  app.add_flag("--kernel-only", kernel_only, "measure only the expert FFN kernel beside OpenBLAS");
  app.add_option("--kernels", kernels,
                 "CPU kernel path: auto, avx2 or avx512 (default: BRIGADE_CPU_KERNELS, else auto)");
  app.add_flag("--compare-paths", compare,
               "prefill, decode and the FFN kernel on every kernel path here, alternating");
  app.add_option("--rounds", cmp.rounds, "rounds of --compare-paths")->check(CLI::Range(1, 100));
  app.add_option("--work-dir", work_dir, "where the generated benchmark model is kept")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  thread_pool& pool = thread_pool::shared();
  engine_figures f;
  if (kernels.empty()) {
    f.path = gpu::cpu::process_kernel_path();
  } else {
    const result<gpu::cpu::kernel_path> chosen = gpu::cpu::choose_kernel_path(kernels);
    if (!chosen) return std::fprintf(stderr, "--kernels: %s\n", chosen.err().message.c_str()), 1;
    f.path = chosen.value();
  }
  const model::model_spec spec = engine_model_spec();
  if (compare) {
    cmp.as_json = as_json;
    cmp.decode_steps = quick ? 8 : 32;
    if (quick) cmp.rounds = 1;
    return compare_kernel_paths(work_dir, spec, pool, cmp);
  }
  auto dev = gpu::cpu::make_backend(&pool, f.path);
  auto loaded = load_engine_model(work_dir, *dev);
  if (!loaded) return std::fprintf(stderr, "%s\n", loaded.err().message.c_str()), 1;
  const model::loaded_model& m = *loaded.value();
  auto blas_lib = load_openblas();
  if (!blas_lib) return std::fprintf(stderr, "%s\n", blas_lib.err().message.c_str()), 1;
  blas_lib->set_threads(pool.size());

  std::fprintf(stderr, "measuring the expert FFN kernel (%s) ...\n",
               gpu::cpu::kernel_path_name(f.path));
  for (int rows : {8, 32, 128, 512})
    f.ffn.push_back(measure_ffn(rows, spec.hidden, spec.moe_inter, pool, f.path, &*blas_lib));
  if (kernel_only) {
    for (const auto& e : f.ffn) {
      std::printf("rows %4d: ours bf16 %6.1f, f32 %6.1f, OpenBLAS %6.1f GFLOP/s (%.2fx, %.2fx)\n",
                  e.rows, e.ours_bf16_gflops, e.ours_f32_gflops, e.openblas_gflops,
                  e.ours_bf16_gflops / e.openblas_gflops, e.ours_f32_gflops / e.openblas_gflops);
    }
    return 0;
  }
  std::fprintf(stderr, "measuring prefill and decode ...\n");
  f.prefill_tokens_per_s = prefill_tokens_per_s(m, *dev, 512, 3);
  for (int b : {1, 8, 32})
    f.decode_tokens_per_s.emplace_back(b, decode_tokens_per_s(m, *dev, b, quick ? 8 : 32));
  f.bandwidth = copy_bandwidth(pool);
  f.active_bytes = active_weight_bytes(m);
  if (as_json) {
    std::printf("%s\n", figures_json(m, spec, f, pool.size()).dump(2).c_str());
  } else {
    print_figures(m, spec, f, pool.size());
  }
  return 0;
}

}  // namespace brigade::bench

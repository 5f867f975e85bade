// `brigade bench engine`: the single-process engine's prefill and decode speed, the expert FFN
// kernel beside OpenBLAS sgemm on the same shapes, and decode at batch 1 beside the bound of
// reading its weights (weight_read_bound.hpp), all measured in one run on one CPU kernel path; with
// --compare-paths, every kernel path this machine has, side by side (engine_paths.hpp); with --peer
// llamacpp, llama.cpp on the same model beside brigade (engine_peer.hpp); with --device cuda:N,
// prefill and decode on that device beside its bandwidth and FLOP bounds (engine_device.hpp).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/engine_device.hpp"
#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/engine_paths.hpp"
#include "bench/engine_peer.hpp"
#include "bench/openblas_loader.hpp"
#include "bench/table.hpp"
#include "bench/weight_read_bound.hpp"
#include "common/thread_pool.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "gpu/device_choice.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using json = nlohmann::json;

// What one run on one kernel path measured.
struct engine_figures {
  gpu::cpu::kernel_path path = gpu::cpu::kernel_path::avx2;
  std::vector<ffn_figures> ffn;
  double prefill_tokens_per_s = 0;
  std::vector<std::pair<int, double>> decode_tokens_per_s;  // (batch, tokens/s)
  weight_read_figures reads;         // the decode bound: one step's weights read as kernels do
  weight_read_figures random_reads;  // the same with experts drawn at random per step
  double pool_handoff_us = 0;        // one parallel_for of empty chunks: the hand-off alone
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
  const double bound_tokens_per_s = f.reads.tokens_per_s();
  j["weight_read_gb_per_s"] = f.reads.bytes_per_s() / 1e9;
  j["active_weight_bytes_per_token"] = f.reads.bytes_per_step;
  j["decode_batch1_bound_tokens_per_s"] = bound_tokens_per_s;
  j["decode_batch1_over_bound"] = bound_tokens_per_s / f.decode_tokens_per_s[0].second;
  j["decode_batch1_share_of_bound"] = f.decode_tokens_per_s[0].second / bound_tokens_per_s;
  j["weight_read_random_experts_tokens_per_s"] = f.random_reads.tokens_per_s();
  j["pool_handoff_us"] = f.pool_handoff_us;
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
  const double bound_tokens_per_s = f.reads.tokens_per_s();
  const double batch1 = f.decode_tokens_per_s[0].second;
  std::printf(
      "decode batch 1: %.1f tokens/s; bound %.1f tokens/s (%.1f MB of weights per token, read "
      "as the kernels read them at %.1f GB/s): %.0f%% of the bound; with experts drawn at random "
      "per step (no routing locality) the reads alone allow %.1f tokens/s\n",
      batch1, bound_tokens_per_s, f.reads.bytes_per_step / 1e6, f.reads.bytes_per_s() / 1e9,
      100.0 * batch1 / bound_tokens_per_s, f.random_reads.tokens_per_s());
  std::printf(
      "thread pool: %.2f us a hand-off (one parallel_for of %d empty chunks, median of 5 "
      "means over 20000 calls)\n",
      f.pool_handoff_us, 4 * threads);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade bench engine: %s\n", message.c_str());
  return 1;
}

// --device cuda:N: refused at once when the device is not here, before any model is written or
// loaded; the CPU's options (kernel paths, OpenBLAS, llama.cpp) do not apply there.
int engine_on_device(const gpu::device_choice& device, const CLI::App& app,
                     const device_bench_options& options) {
  for (const char* cpu_only : {"--kernels", "--compare-paths", "--peer", "--kernel-only"}) {
    if (app.count(cpu_only) > 0) {
      return fail(std::string(cpu_only) +
                  " measures the CPU kernels; it runs with --device cpu, not " +
                  device.to_string());
    }
  }
  auto dev = gpu::open_backend(device, "--device");
  if (!dev) return fail(dev.err().message);
  return bench_engine_on_device(*dev.value(), options);
}

// The model a CPU run measures: --model's checkpoint, with the FFN kernel measured on its
// expert shape, or the benchmark model of --shape.
result<std::unique_ptr<model::loaded_model>> load_cpu_model(const std::string& model_dir,
                                                            const std::string& work_dir,
                                                            const std::string& shape,
                                                            gpu::backend& dev,
                                                            model::model_spec& spec) {
  if (model_dir.empty()) return load_engine_model(work_dir, dev, shape);
  auto loaded = model::loaded_model::load(model_dir, dev, true);
  if (!loaded) return loaded;
  const model::model_config& c = loaded.value()->config;
  spec.hidden = c.hidden_size;
  spec.moe_inter = c.is_moe() ? c.expert_intermediate : c.dense_intermediate;
  spec.dtype = loaded.value()->ckpt->main_dtype();
  return loaded;
}

}  // namespace

int engine(int argc, char** argv) {
  bool as_json = false, quick = false, kernel_only = false, compare = false;
  std::string work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
  std::string kernels;
  std::string shape = "default", peer_name;
  path_comparison_options cmp;
  peer_options peer;
  device_bench_options on_device;
  std::string device_text = "cpu", model_dir;
  CLI::App app{"Engine throughput and kernel speed beside OpenBLAS", "brigade bench engine"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--quick", quick, "fewer steps (for smoke tests)");
  app.add_flag("--kernel-only", kernel_only, "measure only the expert FFN kernel beside OpenBLAS");
  app.add_option("--kernels", kernels,
                 "CPU kernel path: auto, avx2, avx512, avx512_bf16 or amx_bf16 (default: "
                 "BRIGADE_CPU_KERNELS, else auto)");
  app.add_flag("--compare-paths", compare,
               "prefill, decode and the FFN kernel on every kernel path here, alternating");
  app.add_option("--rounds", cmp.rounds, "rounds of --compare-paths and --peer")
      ->check(CLI::Range(1, 100));
  app.add_option(
      "--peer", peer_name,
      "llamacpp: llama.cpp on the same model beside brigade (needs node, npm, gcc, git)");
  app.add_option("--shape", shape, "benchmark model shape: default or wide (engine_model.hpp)");
  app.add_option("--peer-dir", peer.toolchain_dir,
                 "where --peer keeps npm packages, headers and its driver "
                 "(default: peers/llamacpp beside the brigade binary)");
  app.add_option("--work-dir", work_dir, "where the generated benchmark model is kept")
      ->capture_default_str();
  app.add_option("--device", device_text,
                 "where the engine runs: cpu, or cuda:N (prefill and decode beside the device's "
                 "bandwidth and FLOP bounds)")
      ->capture_default_str();
  auto* model_opt = app.add_option("--model", model_dir,
                                   "measure this checkpoint instead of the benchmark model");
  model_opt->excludes(app.get_option("--shape"))
      ->excludes(app.get_option("--peer"))
      ->excludes(app.get_option("--compare-paths"));
  auto* bandwidth_opt =
      app.add_option("--bandwidth-gbs", on_device.peaks.bandwidth_gb_per_s,
                     "with --device cuda:N: the device's memory bandwidth in GB/s (H200: 4800)")
          ->check(CLI::PositiveNumber);
  auto* tflops_opt =
      app.add_option("--peak-tflops", on_device.peaks.bf16_tflop_per_s,
                     "with --device cuda:N: the device's dense bf16 TFLOP/s (H200: 989)")
          ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const result<gpu::device_choice> device = gpu::parse_device(device_text, "--device");
  if (!device) return fail(device.err().message);
  if (device.value().cuda) {
    on_device.model_dir = model_dir;
    on_device.work_dir = work_dir;
    on_device.shape = shape;
    on_device.quick = quick;
    on_device.as_json = as_json;
    return engine_on_device(device.value(), app, on_device);
  }
  if (bandwidth_opt->count() > 0 || tflops_opt->count() > 0) {
    return fail(
        "--bandwidth-gbs and --peak-tflops are the bounds of --device cuda:N; on the "
        "cpu the bound is measured");
  }

  thread_pool& pool = thread_pool::shared();
  engine_figures f;
  if (kernels.empty()) {
    f.path = gpu::cpu::process_kernel_path();
  } else {
    const result<gpu::cpu::kernel_path> chosen = gpu::cpu::choose_kernel_path(kernels);
    if (!chosen) return std::fprintf(stderr, "--kernels: %s\n", chosen.err().message.c_str()), 1;
    f.path = chosen.value();
  }
  const result<model::model_spec> shaped = engine_model_spec(shape);
  if (!shaped) return std::fprintf(stderr, "--shape: %s\n", shaped.err().message.c_str()), 1;
  model::model_spec spec = shaped.value();
  if (!peer_name.empty()) {
    peer.peer = peer_name;
    peer.shape = shape;
    peer.work_dir = work_dir;
    peer.path = f.path;
    peer.rounds = cmp.rounds;
    peer.decode_steps = quick ? 8 : 32;
    if (quick) peer.rounds = 1;
    peer.as_json = as_json;
    return compare_with_peer(peer, pool);
  }
  if (compare) {
    cmp.shape = shape;
    cmp.as_json = as_json;
    cmp.decode_steps = quick ? 8 : 32;
    if (quick) cmp.rounds = 1;
    return compare_kernel_paths(work_dir, spec, pool, cmp);
  }
  auto dev = gpu::cpu::make_backend(&pool, f.path);
  auto loaded = load_cpu_model(model_dir, work_dir, shape, *dev, spec);
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
  f.reads = measure_weight_reads(m, pool, expert_draw::same, 64, 5);
  f.random_reads = measure_weight_reads(m, pool, expert_draw::random, 64, 5);
  f.pool_handoff_us = pool_handoff_us(pool);
  if (as_json) {
    std::printf("%s\n", figures_json(m, spec, f, pool.size()).dump(2).c_str());
  } else {
    print_figures(m, spec, f, pool.size());
  }
  return 0;
}

}  // namespace brigade::bench

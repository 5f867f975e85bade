// `brigade bench cuda-matmul`: the CUDA matmul on expert FFN shapes beside the CPU backend's, in
// one run. Without a CUDA device it says why and measures nothing.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/device_probe.hpp"

namespace brigade::bench {
namespace {

struct ffn_shape {
  const char* name;
  int n;  ///< Output features.
  int k;  ///< Input features.
};

// Qwen3-30B-A3B's experts (hidden 2048, expert intermediate 768), gate and up stacked.
const ffn_shape shapes[] = {{"gate_up 1536x2048", 1536, 2048}, {"down 2048x768", 2048, 768}};
const int batch_rows[] = {1, 4, 16, 64, 256};

// Seconds per matmul: repeats in rounds of `round` calls until `budget_s` has passed.
double seconds_per_call(gpu::backend& dev, const gpu::tensor& x, const gpu::matrix& w,
                        const gpu::tensor& y, double budget_s, int round) {
  using clock = std::chrono::steady_clock;
  dev.matmul(x, w, nullptr, y);  // warm-up: first-launch costs and caches
  dev.synchronize();
  long calls = 0;
  const auto start = clock::now();
  double elapsed = 0.0;
  while (elapsed < budget_s) {
    for (int i = 0; i < round; ++i)
      dev.matmul(x, w, nullptr, y);
    dev.synchronize();
    calls += round;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  }
  return elapsed / static_cast<double>(calls);
}

struct measured {
  std::string shape;
  int m;
  double cuda_gflops, cuda_weight_gbps, cpu_gflops;
};

measured measure(gpu::backend& cuda, gpu::backend& cpu, const ffn_shape& s, int m,
                 double budget_s) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> weights(static_cast<size_t>(s.n) * static_cast<size_t>(s.k));
  for (uint16_t& v : weights)
    v = gpu::f32_to_bf16(dist(rng) * 0.05f);
  std::vector<float> x(static_cast<size_t>(m) * static_cast<size_t>(s.k));
  for (float& v : x)
    v = dist(rng);
  const gpu::host_matrix hw{weights.data(), gpu::dtype::bf16, s.n, s.k};
  double per_call[2];
  gpu::backend* devs[2] = {&cuda, &cpu};
  for (int i = 0; i < 2; ++i) {
    auto w = devs[i]->make_matrix(hw);
    gpu::activation xa = devs[i]->alloc(m, s.k);
    gpu::activation ya = devs[i]->alloc(m, s.n);
    devs[i]->upload(x.data(), xa.view());
    per_call[i] = seconds_per_call(*devs[i], xa.view(), *w, ya.view(), budget_s, i == 0 ? 20 : 1);
  }
  const double flops = 2.0 * m * s.n * s.k;
  const double weight_bytes = 2.0 * s.n * s.k;
  return {s.name, m, flops / per_call[0] / 1e9, weight_bytes / per_call[0] / 1e9,
          flops / per_call[1] / 1e9};
}

}  // namespace

int cuda_matmul(int argc, char** argv) {
  bool json_out = false;
  int device = 0;
  double budget_s = 0.3;
  CLI::App app{"CUDA matmul GFLOP/s on expert FFN shapes beside the CPU backend",
               "brigade bench cuda-matmul"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", json_out, "print one JSON object");
  app.add_option("--device", device, "CUDA device ordinal")->capture_default_str();
  app.add_option("--budget-s", budget_s, "seconds per measurement")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const gpu::device_report report = gpu::probe_cuda();
  if (report.devices.empty()) {
    if (json_out) {
      std::printf("%s\n", nlohmann::json{{"skipped", report.describe()}}.dump().c_str());
    } else {
      std::printf("%s; nothing to measure\n", report.describe().c_str());
    }
    return 0;
  }
  auto cuda = gpu::make_cuda_backend(device);
  if (!cuda) {
    std::fprintf(stderr, "brigade bench cuda-matmul: %s\n", cuda.err().message.c_str());
    return 1;
  }
  auto cpu = gpu::make_cpu_backend();
  std::vector<measured> rows;
  for (const ffn_shape& s : shapes) {
    for (int m : batch_rows)
      rows.push_back(measure(*cuda.value(), *cpu, s, m, budget_s));
  }
  if (json_out) {
    nlohmann::json j{{"device", cuda.value()->name()}, {"dtype", "bfloat16"}};
    for (const measured& r : rows) {
      j["rows"].push_back({{"shape", r.shape},
                           {"m", r.m},
                           {"cuda_gflops", r.cuda_gflops},
                           {"cuda_weight_gbps", r.cuda_weight_gbps},
                           {"cpu_gflops", r.cpu_gflops},
                           {"cuda_over_cpu", r.cuda_gflops / r.cpu_gflops}});
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s, bf16 weights\n", cuda.value()->name().c_str());
  std::printf("%-20s %5s %12s %14s %12s %9s\n", "shape", "m", "cuda GFLOP/s", "cuda weight GB/s",
              "cpu GFLOP/s", "cuda/cpu");
  for (const measured& r : rows) {
    std::printf("%-20s %5d %12.1f %14.1f %12.1f %9.1f\n", r.shape.c_str(), r.m, r.cuda_gflops,
                r.cuda_weight_gbps, r.cpu_gflops, r.cuda_gflops / r.cpu_gflops);
  }
  return 0;
}

}  // namespace brigade::bench

#include "bench/engine_paths.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "gpu/cpu/cpu_backend.hpp"

namespace brigade::bench {
namespace {

using gpu::cpu::kernel_path;
using json = nlohmann::json;

// One path's backend and the benchmark model loaded onto it.
struct path_setup {
  kernel_path path;
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<model::loaded_model> model;
};

struct phase {
  std::string name;
  std::string unit;
  std::function<double(const path_setup&)> run;
};

struct spread {
  double median = 0, min = 0, max = 0;
};

spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

std::vector<phase> phases(const model::model_spec& spec, thread_pool& pool, int steps) {
  std::vector<phase> list;
  list.push_back({"prefill (512-token prompt)", "tokens/s", [](const path_setup& s) {
                    return prefill_tokens_per_s(*s.model, *s.dev, 512, 1);
                  }});
  for (int batch : {1, 8}) {
    list.push_back(
        {"decode batch " + std::to_string(batch), "tokens/s", [batch, steps](const path_setup& s) {
           return decode_tokens_per_s(*s.model, *s.dev, batch, steps);
         }});
  }
  for (int rows : {1, 8, 512}) {
    list.push_back({"expert FFN bf16, " + std::to_string(rows) + " rows", "GFLOP/s",
                    [&spec, &pool, rows](const path_setup& s) {
                      return measure_ffn(rows, spec.hidden, spec.moe_inter, pool, s.path, nullptr)
                          .ours_bf16_gflops;
                    }});
  }
  return list;
}

std::string cell(const spread& s, int decimals) {
  return fixed(s.median, decimals) + " (" + fixed(s.min, decimals) + "-" + fixed(s.max, decimals) +
         ")";
}

// samples[phase][path][round]
using sample_table = std::vector<std::vector<std::vector<double>>>;

sample_table measure_rounds(const std::vector<phase>& list, const std::vector<path_setup>& setups,
                            int rounds) {
  sample_table samples(list.size(), std::vector<std::vector<double>>(setups.size()));
  for (int round = 0; round < rounds; ++round) {
    std::fprintf(stderr, "round %d of %d ...\n", round + 1, rounds);
    for (size_t ph = 0; ph < list.size(); ++ph) {
      for (size_t i = 0; i < setups.size(); ++i) {
        const size_t p = round % 2 ? setups.size() - 1 - i : i;
        samples[ph][p].push_back(list[ph].run(setups[p]));
      }
    }
  }
  return samples;
}

// The table (or JSON) of each phase: each path's spread and each path's ratio to the first.
void report(const std::vector<phase>& list, const std::vector<path_setup>& setups,
            const sample_table& samples, const path_comparison_options& opt, int threads) {
  json j = {{"threads", threads}, {"rounds", opt.rounds}, {"decode_steps", opt.decode_steps}};
  std::vector<std::string> headers{"phase", "unit"};
  for (const path_setup& s : setups) {
    j["kernel_paths"].push_back(gpu::cpu::kernel_path_name(s.path));
    headers.push_back(std::string(gpu::cpu::kernel_path_name(s.path)) + " median (min-max)");
  }
  for (size_t p = 1; p < setups.size(); ++p)
    headers.push_back(std::string(gpu::cpu::kernel_path_name(setups[p].path)) + " / avx2");
  table t(headers);
  for (size_t ph = 0; ph < list.size(); ++ph) {
    std::vector<std::string> row{list[ph].name, list[ph].unit};
    json jp = {{"phase", list[ph].name}, {"unit", list[ph].unit}};
    for (size_t p = 0; p < setups.size(); ++p) {
      const spread s = spread_of(samples[ph][p]);
      row.push_back(cell(s, list[ph].unit == "GFLOP/s" ? 1 : 0));
      jp["paths"][gpu::cpu::kernel_path_name(setups[p].path)] = {
          {"median", s.median}, {"min", s.min}, {"max", s.max}, {"samples", samples[ph][p]}};
    }
    for (size_t p = 1; p < setups.size(); ++p) {
      std::vector<double> ratios;
      for (size_t r = 0; r < samples[ph][p].size(); ++r)
        ratios.push_back(samples[ph][p][r] / samples[ph][0][r]);
      const spread s = spread_of(ratios);
      row.push_back(cell(s, 2));
      jp["ratio_over_avx2"][gpu::cpu::kernel_path_name(setups[p].path)] = {
          {"median", s.median}, {"min", s.min}, {"max", s.max}};
    }
    t.add_row(row);
    j["phases"].push_back(jp);
  }
  if (opt.as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("kernel paths side by side: %d rounds, %d threads, %d decode steps per measurement\n",
              opt.rounds, threads, opt.decode_steps);
  std::printf("ratio: the median of the per-round ratios to the avx2 path (min-max)\n\n");
  std::printf("%s\n", t.render().c_str());
  if (setups.size() == 1) std::printf("this machine has only the avx2 path: nothing to compare\n");
}

}  // namespace

int compare_kernel_paths(const std::string& work_dir, const model::model_spec& spec,
                         thread_pool& pool, const path_comparison_options& opt) {
  std::vector<path_setup> setups;
  for (kernel_path p : gpu::cpu::available_kernel_paths()) {
    path_setup s{p, gpu::cpu::make_backend(&pool, p), nullptr};
    auto loaded = load_engine_model(work_dir, *s.dev, opt.shape);
    if (!loaded) return std::fprintf(stderr, "%s\n", loaded.err().message.c_str()), 1;
    s.model = std::move(loaded.value());
    setups.push_back(std::move(s));
  }
  const std::vector<phase> list = phases(spec, pool, opt.decode_steps);
  report(list, setups, measure_rounds(list, setups, opt.rounds), opt, pool.size());
  return 0;
}

}  // namespace brigade::bench

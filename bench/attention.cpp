// `brigade bench attention`: decode speed as the context grows, with the CPU's keys stored by
// column (gpu/cpu/kv_storage.hpp) beside the same engine with keys stored by row
// (BRIGADE_KV_KEYS=row), alternating round by round. Attention is the part of a decode step that
// grows with the context: the weights a step reads stay the same, the keys and values it reads
// grow with every token. Both layouts give the same bits; the bench checks nothing else.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using json = nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Decode tokens/s with keys stored by row (BRIGADE_KV_KEYS=row) or by column.
double decode_with_keys(bool by_row, const model::loaded_model& m, gpu::backend& dev, int batch,
                        int steps, int context, gpu::dtype kv) {
  if (by_row) {
    setenv("BRIGADE_KV_KEYS", "row", 1);
  } else {
    unsetenv("BRIGADE_KV_KEYS");
  }
  const double tps = decode_tokens_per_s(m, dev, batch, steps, context, kv);
  unsetenv("BRIGADE_KV_KEYS");
  return tps;
}

// "f32" or "bf16".
std::string kv_name(gpu::dtype kv) {
  return kv == gpu::dtype::bf16 ? "bf16" : "f32";
}

struct row_figures {
  int context = 0, batch = 0;
  gpu::dtype kv = gpu::dtype::f32;
  std::vector<double> column_tps, row_tps, ratios;
};

}  // namespace

int attention(int argc, char** argv) {
  CLI::App app{"Decode tokens/s as the context grows: keys stored by column beside by row",
               "brigade bench attention"};
  app.option_defaults()->always_capture_default();
  bool as_json = false, quick = false;
  std::string model_dir = "models/default/target";
  std::string work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
  std::vector<int> contexts{64, 512, 1536};
  std::vector<int> batches{1, 8};
  std::vector<std::string> kv_types{"f32", "bf16"};
  int steps = 96, rounds = 3;
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--quick", quick, "one round of 8 steps at two contexts (for smoke tests)");
  app.add_option("--model", model_dir,
                 "checkpoint directory (none: the generated engine benchmark model)");
  app.add_option("--work-dir", work_dir, "where the generated benchmark model is kept");
  app.add_option("--contexts", contexts, "prompt tokens before decoding starts")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--batches", batches, "sequences decoding together")->check(CLI::Range(1, 256));
  app.add_option("--kv", kv_types, "KV element types: f32, bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--steps", steps, "decode steps timed per run")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", rounds, "alternating rounds of both layouts")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    steps = 8;
    rounds = 1;
    if (app.count("--contexts") == 0) contexts = {64, 256};
    if (app.count("--batches") == 0) batches = {1};
  }

  thread_pool& pool = thread_pool::shared();
  auto dev = gpu::make_cpu_backend();
  auto loaded = model_dir == "none" ? load_engine_model(work_dir, *dev)
                                    : model::loaded_model::load(model_dir, *dev, true);
  if (!loaded) {
    std::fprintf(stderr, "bench attention: %s\n", loaded.err().message.c_str());
    return 1;
  }
  const model::loaded_model& m = *loaded.value();

  std::vector<row_figures> rows;
  std::vector<int> skipped;
  for (int context : contexts) {
    if (context + steps + 2 > m.config.max_positions) {
      skipped.push_back(context);
      continue;
    }
    for (int batch : batches) {
      for (const std::string& kv : kv_types) {
        row_figures r;
        r.context = context;
        r.batch = batch;
        r.kv = kv == "bf16" ? gpu::dtype::bf16 : gpu::dtype::f32;
        rows.push_back(r);
      }
    }
  }
  const int runs = static_cast<int>(rows.size()) * rounds;
  int done = 0;
  for (int round = 0; round < rounds; ++round) {
    for (row_figures& r : rows) {
      std::fprintf(stderr, "\r[%d/%d] context %d, batch %d, %s KV ...", ++done, runs, r.context,
                   r.batch, kv_name(r.kv).c_str());
      // The order turns round every round, so drift falls on both layouts alike.
      const bool row_first = round % 2 == 1;
      double by_row = 0, by_column = 0;
      for (int k = 0; k < 2; ++k) {
        const bool row = (k == 0) == row_first;
        (row ? by_row : by_column) =
            decode_with_keys(row, m, *dev, r.batch, steps, r.context, r.kv);
      }
      r.row_tps.push_back(by_row);
      r.column_tps.push_back(by_column);
      r.ratios.push_back(by_column / by_row);
    }
  }
  std::fprintf(stderr, "\r%*s\r", 60, "");

  json out;
  out["model"] = model_dir;
  out["steps"] = steps;
  out["rounds"] = rounds;
  out["threads"] = pool.size();
  out["rows"] = json::array();
  table t({"context", "batch", "KV", "keys by column tokens/s", "keys by row tokens/s", "speedup"});
  for (const row_figures& r : rows) {
    const double col = median(r.column_tps), row = median(r.row_tps), ratio = median(r.ratios);
    out["rows"].push_back({{"context", r.context},
                           {"batch", r.batch},
                           {"kv", kv_name(r.kv)},
                           {"by_column_tokens_per_s", col},
                           {"by_row_tokens_per_s", row},
                           {"speedup", ratio}});
    t.add_row({std::to_string(r.context), std::to_string(r.batch), kv_name(r.kv), fixed(col, 1),
               fixed(row, 1), fixed(ratio, 2) + "x"});
  }
  out["skipped_contexts"] = skipped;
  if (as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "decode with keys stored by column beside by row (%s, %d threads, %d steps, median "
      "of %d rounds; speedup: the median of per-round ratios)\n\n%s",
      model_dir.c_str(), pool.size(), steps, rounds, t.render().c_str());
  if (!skipped.empty()) {
    std::printf("\nskipped: contexts longer than the model's %d positions allow\n",
                m.config.max_positions);
  }
  return 0;
}

}  // namespace brigade::bench

// `brigade bench balance --live`: the load-to-plan-to-balance chain on a running topology. A
// skewed, drifting workload (bench/skewed_workload.hpp) drives the embedded default model's
// topology with sample windows and re-plans scaled down; the shards' own counters give each
// window's busiest shard over the mean, the events give the adopted plans and their moves, and
// every answer is compared with the single-process engine's, token for token.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "bench/skewed_workload.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "eplb/balance_metrics.hpp"
#include "gpu/backend.hpp"
#include "model/engine.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"
#include "serve/inference_service.hpp"

namespace brigade::bench {
namespace {

using nlohmann::json;

struct live_options {
  bool json_out = false;
  int shards = 4;
  int slots_per_shard = 5;  // 20 slots for 16 experts: 4 replicas
  int64_t sample_steps = 32;
  int64_t replan_steps = 128;
  int windows_per_phase = 14;
  /// Windows over which a phase's prompts take over from the previous phase's, a growing share
  /// of each batch: drift, not a switch (0 switches at once).
  int crossfade_windows = 6;
  double early_replan_above = config::eplb_policy{}.early_replan_above;  // 0: the cadence alone
  int concurrency = 8;
  int max_tokens = 8;
  skew_options skew;
  int timeout_s = 300;
  std::string model;         // Profile this checkpoint instead of a generated one.
  std::string workload_out;  // Only write the workload's phases (prompt ids) here as JSON.
};

// The phases' prompts, for a driver of another topology (tests/cluster/cluster_test.py).
status write_workload(const live_options& o, const std::string& dir) {
  auto dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(dir, *dev, true);
  if (!loaded) return loaded.err();
  auto phases = build_skewed_workload(*loaded.value(), *dev, o.skew);
  if (!phases) return phases.err();
  json out = json::array();
  for (const auto& p : phases.value())
    out.push_back({{"prompts", p.prompts}, {"expert_max_over_mean", p.expert_max_over_mean}});
  std::FILE* f = std::fopen(o.workload_out.c_str(), "w");
  if (!f) return error(errc::io_error, "cannot write " + o.workload_out);
  const std::string text = json{{"phases", out}}.dump();
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written)
    return error(errc::io_error, "cannot write " + o.workload_out);
  return ok_status();
}

// Collects one request's tokens; done() once it ended.
class answer_sink final : public serve::generation_sink {
 public:
  void on_tokens(const std::vector<int32_t>& tokens) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }
  void on_finished(serve::finish_reason, const serve::generation_usage&) override { end(""); }
  void on_error(const error& err) override { end(err.message); }
  bool wait(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_cv_.wait_for(lock, limit, [&] { return done_; });
  }
  std::vector<int32_t> tokens() {
    std::lock_guard<std::mutex> lock(mutex_);
    return tokens_;
  }
  std::string failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

 private:
  void end(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    failure_ = why;
    done_cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable done_cv_;
  std::vector<int32_t> tokens_;
  bool done_ = false;
  std::string failure_;
};

size_t closed_windows(deploy::topology& topo) {
  const json j = json::parse(topo.service().experts_json());
  return j.contains("windows") ? j["windows"].size() : 0;
}

// The engine's greedy answer to each prompt: what every answer of the topology must equal.
std::vector<std::vector<int32_t>> engine_answers(const model::loaded_model& m, gpu::backend& dev,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 int max_tokens) {
  model::engine_options eo;
  eo.kv_tokens = static_cast<int>(prompts.size()) * 128 + 1024;
  model::engine e(m, dev, eo);
  std::vector<int64_t> ids;
  model::request_options ro;
  ro.max_tokens = max_tokens;
  ro.sampling.temperature = 0;
  for (const auto& p : prompts)
    ids.push_back(e.submit(p, ro).value());
  e.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (int64_t id : ids)
    out.push_back(e.output(id));
  return out;
}

struct live_run {
  json windows = json::array();
  json events = json::array();
  std::vector<uint64_t> phase_start;  // first window id of each phase
  int answers = 0;
  int mismatches = 0;
  int failures = 0;
  std::string first_failure;
  double expert_skew[2] = {1, 1};
};

result<live_run> run_live(const live_options& o, const std::string& dir) {
  auto dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(dir, *dev, true);
  if (!loaded) return loaded.err();
  const model::loaded_model& m = *loaded.value();
  std::fprintf(stderr, "profiling the routing of %d candidate prompts ...\n", o.skew.candidates);
  auto phases = build_skewed_workload(m, *dev, o.skew);
  if (!phases) return phases.err();
  std::vector<std::vector<int32_t>> all;
  for (const auto& p : phases.value())
    all.insert(all.end(), p.prompts.begin(), p.prompts.end());
  const auto expected = engine_answers(m, *dev, all, o.max_tokens);

  config::manifest man = config::default_manifest(dir);
  man.experts.count = o.shards;
  man.experts.slots_per_shard = o.slots_per_shard;
  man.eplb.sample_interval_steps = o.sample_steps;
  man.eplb.replan_interval_steps = o.replan_steps;
  man.eplb.copy_interval_ms = 0;
  man.eplb.early_replan_above = o.early_replan_above;
  man.decode.max_running = std::max(man.decode.max_running, o.concurrency);
  auto topo = deploy::topology::start(man);
  if (!topo) return topo.err();
  serve::inference_service& service = topo.value()->service();

  live_run run;
  int64_t next_id = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  size_t offset = 0;  // index in `all` of the phase's first prompt
  for (size_t ph = 0; ph < phases.value().size(); ++ph) {
    const auto& phase = phases.value()[ph];
    if (ph < 2) run.expert_skew[ph] = phase.expert_max_over_mean;
    const size_t start = closed_windows(*topo.value());
    run.phase_start.push_back(start);
    std::fprintf(stderr, "phase %zu: %zu prompts, expert max/mean %.2f ...\n", ph,
                 phase.prompts.size(), phase.expert_max_over_mean);
    size_t turn = 0;
    size_t now = start;
    while ((now = closed_windows(*topo.value())) <
               start + static_cast<size_t>(o.windows_per_phase) &&
           std::chrono::steady_clock::now() < deadline) {
      // During the crossfade a request comes from the previous phase with the share left.
      const double share_new =
          ph == 0 || o.crossfade_windows <= 0
              ? 1.0
              : std::min(1.0, static_cast<double>(now - start + 1) / (o.crossfade_windows + 1));
      std::vector<std::pair<size_t, std::shared_ptr<answer_sink>>> batch;
      for (int c = 0; c < o.concurrency; ++c, ++turn) {
        const bool old = (c + 0.5) / o.concurrency >= share_new;
        const auto& from = old ? phases.value()[ph - 1] : phase;
        const size_t k = turn % from.prompts.size();
        serve::generation_request r;
        r.id = next_id++;
        r.prompt = from.prompts[k];
        r.max_tokens = o.max_tokens;
        r.sampling.temperature = 0;
        auto sink = std::make_shared<answer_sink>();
        if (status s = service.submit(std::move(r), sink); !s) return s.err();
        batch.emplace_back(old ? offset - from.prompts.size() + k : offset + k, sink);
      }
      for (auto& [index, sink] : batch) {
        ++run.answers;
        if (!sink->wait(std::chrono::seconds(60)) || !sink->failure().empty()) {
          if (run.failures++ == 0) run.first_failure = sink->failure();
          continue;
        }
        if (sink->tokens() != expected[index]) ++run.mismatches;
      }
    }
    offset += phase.prompts.size();
  }
  const json experts = json::parse(service.experts_json());
  run.windows = experts["windows"];
  run.events = json::parse(service.events_json(0));
  return run;
}

// The figures of the windows in [from, to) that ran wholly under a layout of epoch in [lo, hi]:
// a window in which a migration switched layouts (its epoch differs from the window before) is
// a mix of two and counts for neither.
json summary(const json& windows, uint64_t from, uint64_t to, uint64_t lo, uint64_t hi) {
  double bal = 0, mom = 0, worst = 0;
  int n = 0;
  uint64_t previous_epoch = 0;
  for (const auto& w : windows) {
    const uint64_t id = w["window"], epoch = w["epoch"];
    const bool switched = epoch != previous_epoch;
    previous_epoch = epoch;
    if (switched || id < from || id >= to || epoch < lo || epoch > hi) continue;
    bal += w["balancedness"].get<double>();
    mom += w["max_over_mean"].get<double>();
    worst = std::max(worst, w["max_over_mean"].get<double>());
    ++n;
  }
  return {{"windows", n},
          {"balancedness", n ? bal / n : 0.0},
          {"max_over_mean", n ? mom / n : 0.0},
          {"worst_max_over_mean", worst}};
}

}  // namespace

int balance_live(int argc, char** argv) {
  live_options o;
  bool live = false;
  CLI::App app{"the expert balancing chain live: skewed load, samples, plans, migrations",
               "brigade bench balance --live"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--live", live, "run on a live topology (this mode)");
  app.add_flag("--json", o.json_out, "print one JSON object with every figure");
  app.add_option("--shards", o.shards, "expert shards")->capture_default_str();
  app.add_option("--slots-per-shard", o.slots_per_shard, "slots per shard (spares hold replicas)")
      ->capture_default_str();
  app.add_option("--sample-steps", o.sample_steps, "steps per load sample window")
      ->capture_default_str();
  app.add_option("--replan-steps", o.replan_steps, "steps between re-plans")->capture_default_str();
  app.add_option("--windows-per-phase", o.windows_per_phase, "windows each workload phase runs")
      ->capture_default_str();
  app.add_option("--phases", o.skew.phases, "workload phases (the hot set changes)")
      ->capture_default_str();
  app.add_option("--early-replan-above", o.early_replan_above,
                 "a window's shard max/mean above which the next plan comes early (0: cadence)")
      ->capture_default_str();
  app.add_option("--crossfade-windows", o.crossfade_windows,
                 "windows over which a phase takes over from the one before (0: a switch)")
      ->capture_default_str();
  app.add_option("--seed", o.skew.seed, "seed of the candidate prompts")->capture_default_str();
  app.add_option("--model", o.model,
                 "profile this checkpoint (default: a generated one shaped "
                 "like the embedded default)");
  app.add_option("--workload-out", o.workload_out,
                 "only build the skewed workload and write its phases' prompt ids here (JSON)");
  CLI11_PARSE(app, argc, argv);
  if (!o.workload_out.empty()) {
    if (o.model.empty()) {
      std::fprintf(stderr, "bench balance --live: --workload-out needs --model\n");
      return 2;
    }
    status w = write_workload(o, o.model);
    if (!w) std::fprintf(stderr, "bench balance --live: %s\n", w.err().message.c_str());
    return w ? 0 : 1;
  }

  const bool generated = o.model.empty();
  const std::string dir = generated ? (std::filesystem::temp_directory_path() /
                                       ("brigade-bench-balance-live-" + std::to_string(::getpid())))
                                          .string()
                                    : o.model;
  model::model_spec spec;
  spec.seed = 7;  // the embedded default's shape: 4 layers, 16 experts, top-4
  if (status w = generated ? model::write_random_model(spec, dir) : ok_status(); !w) {
    std::fprintf(stderr, "bench balance --live: %s\n", w.err().message.c_str());
    return 1;
  }
  auto run = run_live(o, dir);
  std::error_code ignored;
  if (generated) std::filesystem::remove_all(dir, ignored);
  if (!run) {
    std::fprintf(stderr, "bench balance --live: %s\n", run.err().message.c_str());
    return 1;
  }
  const live_run& r = run.value();
  // The first adopted plan, and per phase the windows before and after it took effect.
  uint64_t first_adopted = 0;
  json adopted = json::array();
  for (const auto& e : r.events) {
    if (e["kind"] != "plan_adopted") continue;
    if (first_adopted == 0) first_adopted = e["epoch"];
    adopted.push_back({{"epoch", e["epoch"]},
                       {"predicted_balancedness", e["predicted_balancedness"]},
                       {"moved_slots", e["moved_slots"]},
                       {"detail", e["detail"]}});
  }
  json moves = json::array();
  for (const auto& e : r.events) {
    if (e["kind"] == "migration_finished" || e["kind"] == "migration_rolled_back") {
      moves.push_back({{"kind", e["kind"]}, {"epoch", e["epoch"]}, {"detail", e["detail"]}});
    }
  }
  const uint64_t end = std::numeric_limits<uint64_t>::max();
  const uint64_t p1 = r.phase_start.size() > 1 ? r.phase_start[1] : end;
  json out = {{"benchmark", "balance_live"},
              {"shards", o.shards},
              {"slots_per_shard", o.slots_per_shard},
              {"sample_interval_steps", o.sample_steps},
              {"replan_interval_steps", o.replan_steps},
              {"expert_skew", {r.expert_skew[0], r.expert_skew[1]}},
              {"windows", r.windows},
              {"adopted_plans", adopted},
              {"migrations", moves},
              {"phase0_before", summary(r.windows, 0, p1, 0, 0)},
              {"phase0_after", summary(r.windows, 0, p1, first_adopted ? first_adopted : end, end)},
              {"after_first_adoption",
               summary(r.windows, 0, end, first_adopted ? first_adopted : end, end)},
              {"answers", r.answers},
              {"mismatches", r.mismatches},
              {"failures", r.failures},
              {"first_failure", r.first_failure}};
  if (o.json_out) {
    std::printf("%s\n", json{{"live", out}}.dump().c_str());
  } else {
    std::printf(
        "brigade bench balance --live: %d shards x %d slots, a sample every %lld steps, a "
        "plan every %lld; workload expert max/mean %.2f then %.2f\n\n",
        o.shards, o.slots_per_shard, static_cast<long long>(o.sample_steps),
        static_cast<long long>(o.replan_steps), r.expert_skew[0], r.expert_skew[1]);
    // "shard max/mean" is what the shards counted; "even split" what the layout alone would give
    // with every replica taking an equal share (the workers choose replicas,
    // eplb/replica_dispatch).
    table t({"window", "phase", "epoch", "shard max/mean", "even split", "balancedness"});
    for (const auto& w : r.windows) {
      const uint64_t id = w["window"];
      const double even_ratio = eplb::max_over_mean(w["shard_load"].get<std::vector<double>>());
      t.add_row({std::to_string(id), id >= p1 ? "1" : "0",
                 std::to_string(w["epoch"].get<uint64_t>()),
                 fixed(w["max_over_mean"].get<double>(), 3), fixed(even_ratio, 3),
                 fixed(w["balancedness"].get<double>(), 3)});
    }
    std::printf("%s\n", t.render().c_str());
    for (const auto& a : adopted) {
      std::printf("plan adopted: epoch %llu, predicted balancedness %.3f, %d slots moved (%s)\n",
                  static_cast<unsigned long long>(a["epoch"].get<uint64_t>()),
                  a["predicted_balancedness"].get<double>(), a["moved_slots"].get<int>(),
                  a["detail"].get<std::string>().c_str());
    }
    const json& before = out["phase0_before"];
    const json& after = out["phase0_after"];
    std::printf(
        "\nphase 0 before the first plan: balancedness %.3f, shard max/mean %.3f (%d "
        "windows)\nphase 0 after it: balancedness %.3f, shard max/mean %.3f (%d windows)\n"
        "after the first adopted plan, worst window's shard max/mean: %.3f (goal <= 1.09)\n"
        "answers: %d, %d differ from the engine's, %d failed\n",
        before["balancedness"].get<double>(), before["max_over_mean"].get<double>(),
        before["windows"].get<int>(), after["balancedness"].get<double>(),
        after["max_over_mean"].get<double>(), after["windows"].get<int>(),
        out["after_first_adoption"]["worst_max_over_mean"].get<double>(), r.answers, r.mismatches,
        r.failures);
  }
  return r.mismatches == 0 && r.failures == 0 ? 0 : 1;
}

}  // namespace brigade::bench

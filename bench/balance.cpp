// `brigade bench balance`: the expert-placement planner beside DeepSeek's published EPLB
// heuristic on the same synthetic loads, over a simulated timeline of sample windows.
//
// Every window (1,000 steps) the shards report token counts; every `replan_every` windows each
// algorithm plans from the counts of the last interval and the supervisor's adoption rule
// (judge_adoption) decides whether to migrate. The first plan bootstraps the layout and is not
// counted. Balance is measured on each window's actual counts with the layout in force during
// it, so prediction error from noise and drift is part of every figure.
//
// With --migrations N (default 100) it also times decode steps through N live migrations of a
// real topology (bench/migration_stall.cpp). With --forecast it instead compares planning from a
// forecast of the next interval with planning from the last one (bench/balance_forecast.cpp);
// with --groups, layouts that keep each expert group on one node with free ones, for a
// group-limited router (bench/balance_groups.cpp).
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/balance_common.hpp"
#include "bench/balance_forecast.hpp"
#include "bench/balance_groups.hpp"
#include "bench/expert_load_generator.hpp"
#include "bench/migration_stall.hpp"
#include "bench/table.hpp"
#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/deepseek_eplb.hpp"
#include "eplb/planner.hpp"

namespace brigade::bench {

namespace {

struct balance_options {
  int layers = 58;
  int windows = 200;
  int replan_every = 10;
  double margin = 0.01;
  double keep_slack = 0.01;
  double max_moved = 0.25;
  double tokens_per_step = 4096;
  uint64_t seed = 1;
  bool json = false;
  int migrations = 100;  // a migration overlaps only a step or two: many give a real p99
  bool migration_nodes = false;
  int copy_interval_ms = migration_stall_options{}.copy_interval_ms;
  std::string migration_tls = migration_stall_options{}.transport_tls;
  // A fifth of the slots, as the planner's adopted plans move (at most 25%).
  double move_fraction = migration_stall_options{}.move_fraction;
  std::string steps_svg;                  // where to draw the timed steps; empty: nowhere
  bool forecast = false;                  // the forecast comparison instead of the figures above
  forecast_bench_options forecast_bench;  // its own options; the shared ones are copied in
  bool groups = false;                    // the group placement comparison instead
  group_bench_options group_bench;        // its own options; --seed and --json are copied in
};

const load_scenario scenarios[] = {load_scenario::steady, load_scenario::slow_drift,
                                   load_scenario::fast_drift, load_scenario::sudden_switch};
const char* const algorithm_names[] = {"planner", "deepseek-eplb"};

/// One algorithm's layout and figures over one timeline.
struct algorithm_run {
  std::optional<eplb::layout> current;
  std::vector<double> balancedness;
  std::vector<double> max_over_mean;
  std::vector<double> layer_max_over_mean;
  std::vector<double> worst_layer;
  std::vector<double> moved_fraction;  ///< Per adopted plan, bootstrap excluded.
  std::vector<double> plan_ms;         ///< Wall time, which includes other processes' turns.
  std::vector<double> plan_cpu_ms;     ///< This thread's CPU time: the planner's own cost.
  int proposed = 0;
  int adopted = 0;
};

struct row {
  std::string shape;
  std::string scenario;
  std::string algorithm;
  algorithm_run run;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

/// Wall and CPU time of one call. The machines are shared, so wall time includes waiting for a
/// core; CPU time of the calling thread is the planner's own cost.
class stopwatch {
 public:
  stopwatch() : wall_(std::chrono::steady_clock::now()), cpu_ms_(thread_cpu_ms()) {}
  double wall_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_)
        .count();
  }
  double cpu_ms() const { return thread_cpu_ms() - cpu_ms_; }

 private:
  static double thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_ms_;
};

result<eplb::layout> plan_with(int algorithm, const eplb::load_matrix& estimate,
                               const cluster_shape& shape, const balance_options& o,
                               const eplb::layout* current) {
  if (algorithm == 1) {
    return eplb::plan_deepseek_eplb(estimate, shape.shards, shape.slots_per_shard, 1);
  }
  eplb::planner_options p;
  p.shards = shape.shards;
  p.slots_per_shard = shape.slots_per_shard;
  p.keep_slack = o.keep_slack;
  p.max_moved_fraction = o.max_moved;
  return eplb::plan_layout(estimate, p, current);
}

void record_window(algorithm_run& run, const eplb::load_matrix& window) {
  if (!run.current) return;
  const eplb::balance_report b = eplb::measure_balance(*run.current, window);
  run.balancedness.push_back(b.balancedness);
  run.max_over_mean.push_back(b.max_over_mean);
  run.layer_max_over_mean.push_back(b.layer_max_over_mean);
  run.worst_layer.push_back(b.worst_layer_max_over_mean);
}

status replan(int algorithm, algorithm_run& run, const eplb::load_matrix& estimate,
              const cluster_shape& shape, const balance_options& o) {
  const stopwatch watch;
  auto proposed = plan_with(algorithm, estimate, shape, o, run.current ? &*run.current : nullptr);
  run.plan_ms.push_back(watch.wall_ms());
  run.plan_cpu_ms.push_back(watch.cpu_ms());
  if (!proposed) return proposed.err();
  adopt_by_the_rule(run, std::move(*proposed), estimate, o.margin);
  return ok_status();
}

/// Runs both algorithms in lockstep over one generated timeline.
result<std::vector<row>> simulate(const cluster_shape& shape, load_scenario scenario,
                                  const balance_options& o) {
  load_generator_config g;
  g.layers = o.layers;
  g.experts = shape.experts;
  g.scenario = scenario;
  g.tokens_per_window = 1000.0 * o.tokens_per_step * 8;
  g.switch_window = o.windows / 2;
  g.seed = o.seed;
  expert_load_generator generator(g);
  algorithm_run runs[2];
  eplb::load_matrix estimate(o.layers, std::vector<double>(shape.experts, 0.0));
  for (int w = 0; w < o.windows; ++w) {
    const eplb::load_matrix window = generator.next_window();
    for (auto& run : runs)
      record_window(run, window);
    for (int l = 0; l < o.layers; ++l) {
      for (int e = 0; e < shape.experts; ++e)
        estimate[l][e] += window[l][e];
    }
    if ((w + 1) % o.replan_every != 0) continue;
    for (int a = 0; a < 2; ++a) {
      if (status s = replan(a, runs[a], estimate, shape, o); !s) return s.err();
    }
    for (auto& layer : estimate)
      std::fill(layer.begin(), layer.end(), 0.0);
  }
  std::vector<row> rows;
  for (int a = 0; a < 2; ++a) {
    rows.push_back({shape.name, scenario_name(scenario), algorithm_names[a], std::move(runs[a])});
  }
  return rows;
}

/// Median CPU time of fresh plans (no current layout) of the steady load, both algorithms.
std::vector<double> fresh_plan_ms(const cluster_shape& shape, const balance_options& o) {
  constexpr int repetitions = 15;
  load_generator_config g;
  g.layers = o.layers;
  g.experts = shape.experts;
  g.tokens_per_window = 1000.0 * o.tokens_per_step * 8;
  g.seed = o.seed;
  const eplb::load_matrix load = expert_load_generator(g).next_window();
  std::vector<double> medians;
  for (int a = 0; a < 2; ++a) {
    std::vector<double> ms;
    for (int i = 0; i < repetitions; ++i) {
      const stopwatch watch;
      auto planned = plan_with(a, load, shape, o, nullptr);
      ms.push_back(watch.cpu_ms());
    }
    medians.push_back(median_of(ms));
  }
  return medians;
}

void print_table(const std::vector<row>& rows, const balance_options& o) {
  std::printf(
      "brigade bench balance: %d layers, Zipf(0.65), %d windows of 1000 steps, re-plan "
      "every %d windows, adoption margin %.1f%%\n",
      o.layers, o.windows, o.replan_every, 100 * o.margin);
  std::printf(
      "planner: keep slack %.1f%% of the mean shard load, at most %.0f%% of slots moved "
      "per plan; deepseek-eplb: stateless, same adoption rule\n",
      100 * o.keep_slack, 100 * o.max_moved);
  std::printf(
      "figures: mean over the windows after the bootstrap plan; max/mean summed over "
      "layers, and per layer (layer m/m: sum of layer maxima over sum of layer means, the "
      "step-time factor; worst l.: the worst layer); moved/plan: mean fraction of slots "
      "copied per adopted plan\n\n");
  std::printf("%-24s %-13s %-13s %8s %8s %9s %8s %7s %10s %22s\n", "cluster", "scenario",
              "algorithm", "balanced", "max/mean", "layer m/m", "worst l.", "adopted", "moved/plan",
              "plan ms: cpu med/max, wall");
  for (const row& r : rows) {
    char moved[32] = "-";
    if (!r.run.moved_fraction.empty()) {
      std::snprintf(moved, sizeof moved, "%.1f%%", 100 * mean_of(r.run.moved_fraction));
    }
    char adopted[32];
    std::snprintf(adopted, sizeof adopted, "%d/%d", r.run.adopted, r.run.proposed);
    std::printf("%-24s %-13s %-13s %8.4f %8.4f %9.4f %8.4f %7s %10s %8.2f/%6.2f, %6.2f\n",
                r.shape.c_str(), r.scenario.c_str(), r.algorithm.c_str(),
                mean_of(r.run.balancedness), mean_of(r.run.max_over_mean),
                mean_of(r.run.layer_max_over_mean), mean_of(r.run.worst_layer), adopted, moved,
                median_of(r.run.plan_cpu_ms), max_of(r.run.plan_cpu_ms), median_of(r.run.plan_ms));
  }
}

nlohmann::json row_json(const row& r) {
  return {{"cluster", r.shape},
          {"scenario", r.scenario},
          {"algorithm", r.algorithm},
          {"balancedness", mean_of(r.run.balancedness)},
          {"max_over_mean", mean_of(r.run.max_over_mean)},
          {"layer_max_over_mean", mean_of(r.run.layer_max_over_mean)},
          {"worst_layer_max_over_mean", mean_of(r.run.worst_layer)},
          {"plans_proposed", r.run.proposed},
          {"plans_adopted", r.run.adopted},
          {"moved_fraction_per_adopted_plan", mean_of(r.run.moved_fraction)},
          {"moved_fraction_max", max_of(r.run.moved_fraction)},
          {"plan_cpu_ms_median", median_of(r.run.plan_cpu_ms)},
          {"plan_cpu_ms_max", max_of(r.run.plan_cpu_ms)},
          {"plan_wall_ms_median", median_of(r.run.plan_ms)},
          {"plan_wall_ms_max", max_of(r.run.plan_ms)}};
}

}  // namespace

namespace {

struct goal {
  std::string name;
  double value;
  double target;
  bool at_most;             ///< true: value <= target; false: value >= target.
  std::string caveat = {};  ///< Why a verdict may say little on this machine; empty: none.
  bool met() const { return at_most ? value <= target : value >= target; }
};

const row* find_row(const std::vector<row>& rows, int shape, load_scenario s, int algorithm) {
  for (const row& r : rows) {
    if (r.shape == balance_shapes[shape].name && r.scenario == scenario_name(s) &&
        r.algorithm == algorithm_names[algorithm]) {
      return &r;
    }
  }
  return nullptr;
}

std::vector<goal> goals_of(const std::vector<row>& rows,
                           const std::vector<std::vector<double>>& fresh_ms) {
  std::vector<goal> goals;
  const row* steady = find_row(rows, 0, load_scenario::steady, 0);
  goals.push_back({"384/64x7 steady: planner max/mean per layer",
                   mean_of(steady->run.layer_max_over_mean), 1.05, true});
  goals.push_back({"384/64x7 steady: planner max/mean summed over layers",
                   mean_of(steady->run.max_over_mean), 1.05, true});
  double worst_balancedness = 1;
  double worst_moved = 0;
  double near_ms = 0;
  for (load_scenario s : scenarios) {
    const row* r = find_row(rows, 1, s, 0);
    worst_balancedness = std::min(worst_balancedness, mean_of(r->run.balancedness));
    near_ms = std::max(near_ms, median_of(r->run.plan_cpu_ms));
    for (int shape = 0; shape < 2; ++shape) {
      worst_moved = std::max(worst_moved, mean_of(find_row(rows, shape, s, 0)->run.moved_fraction));
    }
  }
  goals.push_back(
      {"256/32x9: planner balancedness, worst scenario", worst_balancedness, 0.95, false});
  goals.push_back(
      {"planner slots moved per adopted plan, worst scenario mean", worst_moved, 0.25, true});
  goals.push_back({"256/32x9: fresh plan of 58 layers, median CPU ms", fresh_ms[1][0], 5.0, true});
  goals.push_back(
      {"256/32x9: re-plan from the current layout, worst median CPU ms", near_ms, 5.0, true});
  return goals;
}

void print_goals(const std::vector<goal>& goals, const std::vector<std::vector<double>>& fresh_ms) {
  std::printf("\nfresh plan of 58 layers (median CPU ms): ");
  for (int shape = 0; shape < 2; ++shape) {
    std::printf("%s: planner %.2f, deepseek-eplb %.2f%s", balance_shapes[shape].name,
                fresh_ms[shape][0], fresh_ms[shape][1], shape == 0 ? "; " : "\n");
  }
  std::printf("\ngoals:\n");
  for (const goal& g : goals) {
    std::printf("  %-62s %8.4f %s %-6g %s\n", g.name.c_str(), g.value,
                g.at_most ? "<=" : ">=", g.target, g.met() ? "met" : "MISSED");
    if (!g.caveat.empty()) std::printf("    (%s)\n", g.caveat.c_str());
  }
}

// "0.981x-1.094x", or "no interval" where the run had too few migrations to bound the ratio.
std::string interval_text(const ratio_interval& i) {
  if (i.high <= 0) return "no interval";
  return fixed(i.low, 3) + "x-" + fixed(i.high, 3) + "x";
}

nlohmann::json interval_json(const ratio_interval& i) {
  if (i.high <= 0) return nullptr;
  return nlohmann::json::array({i.low, i.high});
}

void print_stall(const migration_stall_figures& s) {
  // In one process new slots share the weights in memory: nothing is copied, nothing is paced.
  const std::string copies = s.two_nodes ? std::to_string(s.copy_interval_ms) +
                                               " ms copy interval, data plane " + s.transport_tls
                                         : "new slots share the weights, nothing is copied";
  std::printf(
      "\nDecode steps (batch 32, 4 expert shards of 10 slots, 32 experts, %s) through %d live "
      "migrations\nmoving %.0f%% of each layer's slots, %.3f s each on average (%s):\n%d steps "
      "overlapped a migration, %d did not.\n",
      s.two_nodes ? "on two node processes" : "in one process", s.migrations, 100 * s.move_fraction,
      s.mean_migration_s, copies.c_str(), s.steps_during, s.steps_outside);
  table t({"step time over", "", "during migrations", "control windows", "outside", "fixed loop"});
  t.add_row({"the median of the 16 nearest steps outside", "median",
             fixed(s.local_median_during, 3) + "x", fixed(s.local_median_control, 3) + "x", "1x",
             "1x"});
  t.add_row({"", "p99", fixed(s.local_p99_during, 3) + "x", fixed(s.local_p99_control, 3) + "x",
             fixed(s.local_p99_outside, 3) + "x", fixed(s.machine_p99_ratio, 3) + "x"});
  t.add_row({"the run's median, " + fixed(s.median_ms, 2) + " ms (drifts)", "p99",
             fixed(s.p99_ratio(), 3) + "x", "", fixed(s.noise_ratio(), 3) + "x", ""});
  std::printf("%s", t.render().c_str());
  std::printf(
      "  The fixed loop streams memory as a step does, the same work each time, in the same run:\n"
      "  the machine's own spread.\n"
      "  The migrations' own share, local ratios during over the others, with 95%% intervals from "
      "a\n"
      "  bootstrap over %d migration cycles:\n",
      s.local_p99_share_interval.groups);
  table share({"during migrations over", "median", "95% interval", "p99", "95% interval"});
  share.add_row({"steps outside", fixed(s.local_median_share(), 3) + "x",
                 interval_text(s.local_median_share_interval), fixed(s.local_p99_share(), 3) + "x",
                 interval_text(s.local_p99_share_interval)});
  share.add_row({"steps in control windows", fixed(s.median_over_control(), 3) + "x",
                 interval_text(s.median_over_control_interval),
                 fixed(s.p99_over_control(), 3) + "x", interval_text(s.p99_over_control_interval)});
  std::printf("%s", share.render().c_str());
  std::printf("  Where in a migration the steps fall, each over its local median:\n");
  table phases({"steps", "", "count", "median", "p90"});
  for (const phase_figure& p : s.phases) {
    if (p.steps == 0) continue;
    phases.add_row(
        {p.what, p.name, std::to_string(p.steps), fixed(p.median, 3) + "x", fixed(p.p90, 3) + "x"});
  }
  std::printf("%s", phases.render().c_str());
}

bool write_steps_svg(migration_stall_figures s, const std::string& path) {
  s.plot.title = "Decode steps through " + std::to_string(s.migrations) + " live migrations, " +
                 (s.two_nodes ? "shards on two node processes, copy interval " +
                                    std::to_string(s.copy_interval_ms) + " ms"
                              : std::string("one process"));
  s.plot.lines = {{"goal 1.05x", 1.05},
                  {"p99 during " + fixed(s.local_p99_during, 2) + "x", s.local_p99_during},
                  {"p99 outside " + fixed(s.local_p99_outside, 2) + "x", s.local_p99_outside}};
  // Written aside and renamed over: a full disk leaves the file as it was, not half a plot.
  const std::string partial = path + ".partial";
  std::ofstream out(partial, std::ios::trunc);
  out << step_time_svg(s.plot);
  out.close();
  if (!out || std::rename(partial.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "brigade bench balance: writing --steps-svg %s failed: %s\n", path.c_str(),
                 std::strerror(errno));
    std::remove(partial.c_str());
    return false;
  }
  std::fprintf(stderr, "drew %zu steps into %s\n", s.plot.steps.size(), path.c_str());
  return true;
}

void print_json(const std::vector<row>& rows, const std::vector<goal>& goals,
                const std::vector<std::vector<double>>& fresh_ms, const balance_options& o,
                const std::optional<migration_stall_figures>& stall) {
  nlohmann::json doc;
  doc["benchmark"] = "balance";
  doc["layers"] = o.layers;
  doc["windows"] = o.windows;
  doc["replan_every_windows"] = o.replan_every;
  doc["adoption_margin"] = o.margin;
  doc["keep_slack"] = o.keep_slack;
  doc["max_moved_fraction"] = o.max_moved;
  doc["tokens_per_window"] = 1000.0 * o.tokens_per_step * 8;
  doc["zipf_exponent"] = 0.65;
  doc["seed"] = o.seed;
  for (const row& r : rows)
    doc["results"].push_back(row_json(r));
  for (int shape = 0; shape < 2; ++shape) {
    doc["fresh_plan_cpu_ms_median"].push_back({{"cluster", balance_shapes[shape].name},
                                               {"planner", fresh_ms[shape][0]},
                                               {"deepseek-eplb", fresh_ms[shape][1]}});
  }
  for (const goal& g : goals) {
    doc["goals"].push_back({{"goal", g.name},
                            {"value", g.value},
                            {"target", g.target},
                            {"at_most", g.at_most},
                            {"met", g.met()},
                            {"caveat", g.caveat}});
  }
  if (stall) {
    doc["migration"] = {
        {"two_nodes", stall->two_nodes},
        {"migrations", stall->migrations},
        {"migrations_asked", stall->migrations_asked},
        {"mean_migration_s", stall->mean_migration_s},
        {"steps_during", stall->steps_during},
        {"steps_outside", stall->steps_outside},
        {"copy_interval_ms", stall->copy_interval_ms},
        {"transport_tls", stall->two_nodes ? nlohmann::json(stall->transport_tls) : nullptr},
        {"move_fraction", stall->move_fraction},
        {"steps_control", stall->steps_control},
        {"local_median_control", stall->local_median_control},
        {"local_p99_control", stall->local_p99_control},
        {"median_step_ms", stall->median_ms},
        {"p99_step_ms_during", stall->p99_during_ms},
        {"p99_step_ms_outside", stall->p99_outside_ms},
        {"p99_during_over_median", stall->p99_ratio()},
        {"p99_outside_over_median", stall->noise_ratio()},
        {"p99_during_over_p99_outside",
         stall->p99_outside_ms > 0 ? stall->p99_during_ms / stall->p99_outside_ms : 0.0},
        {"local_p99_during_over_local_p99_outside", stall->local_p99_share()},
        {"local_p99_share_interval_95", interval_json(stall->local_p99_share_interval)},
        {"local_median_during_over_local_median_outside", stall->local_median_share()},
        {"local_median_share_interval_95", interval_json(stall->local_median_share_interval)},
        {"local_median_during_over_control", stall->median_over_control()},
        {"local_median_over_control_interval_95",
         interval_json(stall->median_over_control_interval)},
        {"local_p99_during_over_control", stall->p99_over_control()},
        {"local_p99_over_control_interval_95", interval_json(stall->p99_over_control_interval)},
        {"bootstrap_cycles", stall->local_p99_share_interval.groups},
        {"local_median_during", stall->local_median_during},
        {"local_p99_during", stall->local_p99_during},
        {"local_p99_outside", stall->local_p99_outside},
        {"fixed_loop_p99_over_median", stall->machine_p99_ratio}};
    for (const phase_figure& p : stall->phases) {
      doc["migration"]["phases"][p.name] = {
          {"steps", p.steps}, {"local_median", p.median}, {"local_p90", p.p90}};
    }
  }
  std::printf("%s\n", doc.dump().c_str());
}

forecast_bench_options forecast_options_of(const balance_options& o) {
  forecast_bench_options f = o.forecast_bench;
  f.layers = o.layers;
  f.windows = o.windows;
  f.replan_every = o.replan_every;
  f.margin = o.margin;
  f.keep_slack = o.keep_slack;
  f.max_moved = o.max_moved;
  f.tokens_per_step = o.tokens_per_step;
  f.seed = o.seed;
  f.json = o.json;
  return f;
}

}  // namespace

int balance(int argc, char** argv) {
  CLI::App app{"Expert-placement planner beside DeepSeek's EPLB heuristic on synthetic loads.",
               "brigade bench balance"};
  app.option_defaults()->always_capture_default();
  balance_options o;
  app.add_option("--layers", o.layers, "MoE layers")->check(CLI::PositiveNumber);
  app.add_option("--windows", o.windows, "sample windows of 1000 steps to simulate")
      ->check(CLI::Range(20, 100000));
  app.add_option("--replan-every", o.replan_every, "sample windows per re-plan interval")
      ->check(CLI::Range(1, 10000));
  app.add_option("--margin", o.margin, "adoption margin: least relative gain that migrates")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--keep-slack", o.keep_slack, "planner keep slack (fraction of mean load)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-moved", o.max_moved, "planner move budget per plan (fraction of slots)")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--tokens-per-step", o.tokens_per_step, "tokens per decode step (8 experts each)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "load generator seed");
  app.add_flag("--json", o.json, "print one JSON object with every figure");
  app.add_option("--migrations", o.migrations,
                 "live migrations to time decode steps through (0 skips that part; fewer when the "
                 "timed sequences end first, and then it says so)")
      ->check(CLI::Range(0, 1000));
  auto* nodes_flag =
      app.add_flag("--migration-nodes", o.migration_nodes,
                   "time the migrations with the shards on two `brigade node` processes on "
                   "loopback, so experts that change nodes are copied over the data plane");
  app.add_option("--migration-tls", o.migration_tls,
                 "the data plane's UCX_TLS between those nodes: tcp, or shared memory "
                 "(posix,sysv,cma,self)")
      ->needs(nodes_flag);
  app.add_option("--copy-interval-ms", o.copy_interval_ms,
                 "a shard's pause after each expert copied in from another node (the manifest's "
                 "eplb.copy_interval_ms; 0: back to back)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--move-fraction", o.move_fraction,
                 "the share of each layer's slots a timed migration moves; 0 moves none and times "
                 "the switch protocol alone")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--steps-svg", o.steps_svg,
                 "also draw every timed decode step, with the migration windows, into this SVG "
                 "file");
  add_forecast_options(app, o.forecast, o.forecast_bench);
  add_group_options(app, o.groups, o.group_bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.forecast && o.groups) {
    std::fprintf(stderr,
                 "brigade bench balance: --forecast and --groups are two benchmarks; "
                 "ask for one\n");
    return 2;
  }
  if (o.forecast) return run_balance_forecast(forecast_options_of(o));
  if (o.groups) {
    o.group_bench.seed = o.seed;
    o.group_bench.json = o.json;
    return run_balance_groups(o.group_bench);
  }
  if (!o.steps_svg.empty() && o.migrations == 0) {
    std::fprintf(stderr, "brigade bench balance: --steps-svg needs --migrations above 0\n");
    return 2;
  }
  // Found out now rather than after minutes of timing, without touching the file itself.
  if (!o.steps_svg.empty()) {
    const std::string probe = o.steps_svg + ".partial";
    if (!std::ofstream(probe)) {
      std::fprintf(stderr, "brigade bench balance: cannot write --steps-svg %s: %s\n",
                   o.steps_svg.c_str(), std::strerror(errno));
      return 1;
    }
    std::remove(probe.c_str());
  }
  std::vector<row> rows;
  for (const cluster_shape& shape : balance_shapes) {
    for (load_scenario s : scenarios) {
      auto timeline = simulate(shape, s, o);
      if (!timeline) {
        std::fprintf(stderr, "brigade bench balance: %s\n", timeline.err().describe().c_str());
        return 1;
      }
      for (row& r : *timeline)
        rows.push_back(std::move(r));
    }
  }
  std::vector<std::vector<double>> fresh_ms;
  for (const cluster_shape& shape : balance_shapes)
    fresh_ms.push_back(fresh_plan_ms(shape, o));
  std::vector<goal> goals = goals_of(rows, fresh_ms);
  std::optional<migration_stall_figures> stall;
  if (o.migrations > 0) {
    std::fprintf(stderr, "timing decode steps through %d live migrations ...\n", o.migrations);
    migration_stall_options so;
    so.work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
    so.migrations = o.migrations;
    so.two_nodes = o.migration_nodes;
    so.copy_interval_ms = o.copy_interval_ms;
    so.transport_tls = o.migration_tls;
    so.move_fraction = o.move_fraction;
    auto s = measure_migration_stall(so);
    if (!s) {
      std::fprintf(stderr, "brigade bench balance: migration: %s\n", s.err().message.c_str());
      return 1;
    }
    stall = s.value();
    if (stall->migrations < stall->migrations_asked) {
      std::fprintf(stderr,
                   "brigade bench balance: the sequences ran out of tokens after %d of the %d "
                   "migrations asked; the figures cover those %d (ask for fewer, or rerun and "
                   "compare)\n",
                   stall->migrations, stall->migrations_asked, stall->migrations);
    }
    if (!o.steps_svg.empty() && !write_steps_svg(*stall, o.steps_svg)) return 1;
    goals.push_back(
        {"p99 step time during migration / local median", stall->local_p99_during, 1.05, true});
    if (stall->machine_p99_ratio > goals.back().target && stall->local_p99_outside > 0) {
      goals.back().caveat = "this machine alone spreads identical work " +
                            fixed(stall->machine_p99_ratio, 3) +
                            "x at p99, so it cannot show this goal met; p99 during over p99 "
                            "outside: " +
                            fixed(stall->local_p99_share(), 3) + "x, 95% interval " +
                            interval_text(stall->local_p99_share_interval);
    }
  }
  if (o.json) {
    print_json(rows, goals, fresh_ms, o, stall);
  } else {
    print_table(rows, o);
    if (stall) print_stall(*stall);
    print_goals(goals, fresh_ms);
  }
  return 0;
}

}  // namespace brigade::bench

// `brigade bench balance --forecast`: does planning from a forecast of the next re-plan interval
// balance better than planning from the last one?
//
// Each timeline runs three algorithms in lockstep: DeepSeek's EPLB and the planner, both planning
// from the counts of the last interval, and the planner planning from eplb::load_forecast's
// planning load (the forecast of the next interval, hedged), its plan polished for the forecast
// loads along that interval (eplb::plan_for_trajectory). The forecast observes every sample
// window. All three use the supervisor's adoption rule; the forecast's proposals are judged on the
// forecast loads along the next two intervals, the others on the last interval's counts. The
// first plan bootstraps each layout and is not counted. Every sample window is then scored with
// the layout in force during it: a plan made from the intervals up to w is scored on the windows
// of interval w + 1.
#include "bench/balance_forecast.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/balance_common.hpp"
#include "bench/expert_load_generator.hpp"
#include "bench/table.hpp"
#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/deepseek_eplb.hpp"
#include "eplb/planner.hpp"
#include "eplb/trajectory_polish.hpp"

namespace brigade::bench {

namespace {

/// A drift speed: windows per crossfade from one popularity permutation to the next, and the
/// share of the usual traffic (less traffic, noisier counts).
struct drift {
  const char* name;
  load_scenario scenario;
  int crossfade_windows;
  double traffic = 1;
};

// The sparse steady load has a thousandth of the tokens: counts noisy enough for noise to look
// like a trend and for plans to be adopted on noise alone.
const drift drifts[] = {{"steady", load_scenario::steady, 0},
                        {"steady, sparse", load_scenario::steady, 0, 0.001},
                        {"slow drift", load_scenario::slow_drift, 500},
                        {"medium drift", load_scenario::slow_drift, 150},
                        {"fast drift", load_scenario::fast_drift, 50}};

// The last one is no algorithm: the planner given the counts of the very interval its plan will
// serve, which no forecast can know. It bounds what a forecast of the interval can gain.
enum algorithm { eplb_last, planner_last, planner_forecast, planner_foresight, algorithm_count };
const char* const algorithm_names[] = {"deepseek-eplb", "planner", "planner+forecast",
                                       "planner+foresight"};

/// One algorithm's layout and figures over one timeline.
struct algorithm_run {
  std::optional<eplb::layout> current;
  std::vector<double> balancedness;        ///< Summed over layers, per scored window.
  std::vector<double> layer_balancedness;  ///< 1 / layer_max_over_mean, per scored window.
  std::vector<double> moved_fraction;      ///< Per adopted plan, bootstrap excluded.
  int proposed = 0;
  int adopted = 0;
};

eplb::planner_options planner_options_of(const cluster_shape& shape,
                                         const forecast_bench_options& o) {
  eplb::planner_options p;
  p.shards = shape.shards;
  p.slots_per_shard = shape.slots_per_shard;
  p.keep_slack = o.keep_slack;
  p.max_moved_fraction = o.max_moved;
  return p;
}

result<eplb::layout> plan_with(algorithm a, const eplb::load_matrix& load,
                               const cluster_shape& shape, const forecast_bench_options& o,
                               const eplb::layout* current) {
  if (a == eplb_last) {
    return eplb::plan_deepseek_eplb(load, shape.shards, shape.slots_per_shard, 1);
  }
  return eplb::plan_layout(load, planner_options_of(shape, o), current);
}

/// Plans from `plan_load` and adopts by the rule, judged on `judge_load`.
status replan(algorithm a, algorithm_run& run, const eplb::load_matrix& plan_load,
              const eplb::load_matrix& judge_load, const cluster_shape& shape,
              const forecast_bench_options& o) {
  auto proposed = plan_with(a, plan_load, shape, o, run.current ? &*run.current : nullptr);
  if (!proposed) return proposed.err();
  adopt_by_the_rule(run, std::move(*proposed), judge_load, o.margin);
  return ok_status();
}

/// The forecast's step: plans for the forecast, polished for the loads along the interval it
/// serves, and judged along the next two (a plan the margin keeps serves more than one).
status replan_forecast(algorithm_run& run, const eplb::load_forecast& forecast,
                       const cluster_shape& shape, const forecast_bench_options& o) {
  const eplb::load_matrix planning = forecast.planning_load();
  if (o.trajectory_points == 0) {
    return replan(planner_forecast, run, planning, forecast.expected(), shape, o);
  }
  // Observed windows per interval: the interval after the newest window spans horizons
  // (0.5, r + 0.5).
  const double r = o.per_interval ? 1 : o.replan_every;
  const int k = o.trajectory_points;
  auto proposed = eplb::plan_for_trajectory(planning, forecast.trajectory(0.5, r + 0.5, k),
                                            planner_options_of(shape, o),
                                            run.current ? &*run.current : nullptr);
  if (!proposed) return proposed.err();
  adopt_by_the_rule(run, std::move(*proposed), forecast.trajectory(0.5, 2 * r + 0.5, 2 * k),
                    o.margin);
  return ok_status();
}

using timeline_runs = std::array<algorithm_run, algorithm_count>;

result<timeline_runs> simulate(const cluster_shape& shape, const drift& d, uint64_t seed,
                               const forecast_bench_options& o) {
  load_generator_config g;
  g.layers = o.layers;
  g.experts = shape.experts;
  g.scenario = d.scenario;
  g.tokens_per_window = 1000.0 * o.tokens_per_step * 8 * d.traffic;
  if (d.scenario == load_scenario::slow_drift) g.slow_crossfade_windows = d.crossfade_windows;
  if (d.scenario == load_scenario::fast_drift) g.fast_crossfade_windows = d.crossfade_windows;
  g.seed = seed;
  expert_load_generator generator(g);
  eplb::load_forecast forecast(
      o.per_interval ? o.forecast : eplb::per_sample_window(o.forecast, o.replan_every));
  timeline_runs runs;
  const eplb::load_matrix zero(o.layers, std::vector<double>(shape.experts, 0.0));
  eplb::load_matrix interval = zero;
  // The windows of the interval to come, drawn early for the foresight plan.
  std::deque<eplb::load_matrix> ahead;
  for (int w = 0; w < o.windows; ++w) {
    while (static_cast<int>(ahead.size()) < o.replan_every)
      ahead.push_back(generator.next_window());
    const eplb::load_matrix window = std::move(ahead.front());
    ahead.pop_front();
    for (algorithm_run& run : runs) {
      if (!run.current) continue;
      const eplb::balance_report b = eplb::measure_balance(*run.current, window);
      run.balancedness.push_back(b.balancedness);
      run.layer_balancedness.push_back(1 / b.layer_max_over_mean);
    }
    for (int l = 0; l < o.layers; ++l) {
      for (int e = 0; e < shape.experts; ++e)
        interval[l][e] += window[l][e];
    }
    if (!o.per_interval) {
      if (status s = forecast.observe(window); !s) return s.err();
    }
    if ((w + 1) % o.replan_every != 0) continue;
    if (o.per_interval) {
      if (status s = forecast.observe(interval); !s) return s.err();
    }
    for (algorithm a : {eplb_last, planner_last}) {
      if (status s = replan(a, runs[a], interval, interval, shape, o); !s) return s.err();
    }
    if (status s = replan_forecast(runs[planner_forecast], forecast, shape, o); !s) {
      return s.err();
    }
    eplb::load_matrix next = zero;
    while (static_cast<int>(ahead.size()) < o.replan_every)
      ahead.push_back(generator.next_window());
    for (const eplb::load_matrix& future : ahead) {
      for (int l = 0; l < o.layers; ++l) {
        for (int e = 0; e < shape.experts; ++e)
          next[l][e] += future[l][e];
      }
    }
    if (status s = replan(planner_foresight, runs[planner_foresight], next, next, shape, o); !s) {
      return s.err();
    }
    interval = zero;
  }
  return runs;
}

/// One cluster shape and drift speed, every seed.
struct row {
  const cluster_shape* shape;
  const drift* loads;
  std::vector<timeline_runs> seeds;

  /// The mean over seeds of a per-run figure.
  template <typename F>
  double mean(algorithm a, F figure) const {
    double sum = 0;
    for (const timeline_runs& t : seeds)
      sum += figure(t[a]);
    return sum / seeds.size();
  }
  double layer_balancedness(algorithm a) const {
    return mean(a, [](const algorithm_run& r) { return mean_of(r.layer_balancedness); });
  }
  double balancedness(algorithm a) const {
    return mean(a, [](const algorithm_run& r) { return mean_of(r.balancedness); });
  }
  /// Mean fraction of slots moved per adopted plan, over every adopted plan of every seed.
  double moved(algorithm a) const {
    std::vector<double> all;
    for (const timeline_runs& t : seeds)
      all.insert(all.end(), t[a].moved_fraction.begin(), t[a].moved_fraction.end());
    return mean_of(all);
  }
  double moved_max(algorithm a) const {
    double m = 0;
    for (const timeline_runs& t : seeds)
      m = std::max(m, max_of(t[a].moved_fraction));
    return m;
  }
  /// The least, over seeds, of the forecast's layer balancedness minus algorithm a's.
  double worst_gain_over(algorithm a) const {
    double worst = 1;
    for (const timeline_runs& t : seeds) {
      worst = std::min(worst, mean_of(t[planner_forecast].layer_balancedness) -
                                  mean_of(t[a].layer_balancedness));
    }
    return worst;
  }
  int adopted(algorithm a) const {
    int n = 0;
    for (const timeline_runs& t : seeds)
      n += t[a].adopted;
    return n;
  }
  int proposed(algorithm a) const {
    int n = 0;
    for (const timeline_runs& t : seeds)
      n += t[a].proposed;
    return n;
  }
};

struct goal {
  std::string name;
  double value;
  double target;
  bool at_most;           ///< true: value <= target; false: value >= target.
  std::string note = {};  ///< What bounds the value, where that says more; empty: nothing.
  bool met() const { return at_most ? value <= target : value >= target; }
};

std::vector<goal> goals_of(const std::vector<row>& rows) {
  const drift* const slow = &drifts[2];
  double slow_gain = 1;
  double slow_foresight_gain = 1;
  double steady_gain = 1;
  double worst_moved = 0;
  for (const row& r : rows) {
    if (r.loads == slow) {
      const double gain = r.layer_balancedness(planner_forecast) - r.layer_balancedness(eplb_last);
      if (gain < slow_gain) {
        slow_gain = gain;
        slow_foresight_gain =
            r.layer_balancedness(planner_foresight) - r.layer_balancedness(eplb_last);
      }
    }
    if (r.loads->scenario == load_scenario::steady) {
      steady_gain = std::min(steady_gain, r.worst_gain_over(planner_last));
    }
    worst_moved = std::max(worst_moved, r.moved_max(planner_forecast));
  }
  return {
      {"slow drift: forecast minus eplb, layer balancedness, worst cluster", slow_gain, 0.02, false,
       "the planner given the counts of the interval it serves gains " +
           fixed(slow_foresight_gain, 4) + " there"},
      {"forecast: slots moved by any adopted plan", worst_moved, 0.25, true},
      {"steady loads: forecast minus last-interval planner, worst seed", steady_gain, 0.0, false}};
}

std::string percent(double fraction) {
  return fixed(100 * fraction, 1) + "%";
}

void print_table(const std::vector<row>& rows, const std::vector<goal>& goals,
                 const forecast_bench_options& o) {
  const eplb::forecast_options& f = o.forecast;
  std::printf(
      "brigade bench balance --forecast: %d layers, Zipf(0.65), %d windows of 1000 steps, re-plan "
      "every %d windows, adoption margin %.1f%%, seeds %llu-%llu\n"
      "forecast: %d intervals, recency decay %.2f, trend at %.1f standard errors, %.1f interval "
      "ahead, hedge %.2f spreads, observing %s; plans polished for %d points along the interval "
      "(0: not)\n"
      "layer balancedness: sum of layer means over sum of layer maxima (1 / layer max/mean); "
      "summed: mean over max of the load summed over layers; both the mean over the scored "
      "windows and seeds.\nforesight: the planner given the counts of the interval it serves, "
      "which no forecast knows\n\n",
      o.layers, o.windows, o.replan_every, 100 * o.margin, static_cast<unsigned long long>(o.seed),
      static_cast<unsigned long long>(o.seed + o.seeds - 1), f.history_windows, f.recency_decay,
      f.trend_z, f.horizon_windows, f.hedge,
      o.per_interval ? "each interval's sum" : "every sample window", o.trajectory_points);
  table balance({"cluster", "loads", "eplb", "planner", "forecast", "foresight", "fc - eplb",
                 "fc / eplb", "fc / planner", "summed: eplb", "planner", "forecast"});
  table moved(
      {"cluster", "loads", "eplb", "planner", "forecast", "forecast max", "forecast adopted"});
  for (const row& r : rows) {
    const double forecast = r.layer_balancedness(planner_forecast);
    balance.add_row({r.shape->name, r.loads->name, fixed(r.layer_balancedness(eplb_last), 4),
                     fixed(r.layer_balancedness(planner_last), 4), fixed(forecast, 4),
                     fixed(r.layer_balancedness(planner_foresight), 4),
                     fixed(forecast - r.layer_balancedness(eplb_last), 4),
                     fixed(forecast / r.layer_balancedness(eplb_last), 4),
                     fixed(forecast / r.layer_balancedness(planner_last), 4),
                     fixed(r.balancedness(eplb_last), 4), fixed(r.balancedness(planner_last), 4),
                     fixed(r.balancedness(planner_forecast), 4)});
    moved.add_row({r.shape->name, r.loads->name, percent(r.moved(eplb_last)),
                   percent(r.moved(planner_last)), percent(r.moved(planner_forecast)),
                   percent(r.moved_max(planner_forecast)),
                   std::to_string(r.adopted(planner_forecast)) + "/" +
                       std::to_string(r.proposed(planner_forecast))});
  }
  std::printf("realized layer balancedness (fc: forecast), and summed balancedness:\n%s\n",
              balance.render().c_str());
  std::printf("slots moved per adopted plan (mean over every adopted plan of every seed):\n%s",
              moved.render().c_str());
  std::printf("\ngoals:\n");
  for (const goal& g : goals) {
    std::printf("  %-70s %8.4f %s %-5g %s\n", g.name.c_str(), g.value,
                g.at_most ? "<=" : ">=", g.target, g.met() ? "met" : "MISSED");
    if (!g.note.empty()) std::printf("    (%s)\n", g.note.c_str());
  }
}

nlohmann::json algorithm_json(const row& r, algorithm a) {
  return {{"layer_balancedness", r.layer_balancedness(a)},
          {"balancedness", r.balancedness(a)},
          {"moved_fraction_per_adopted_plan", r.moved(a)},
          {"moved_fraction_max", r.moved_max(a)},
          {"plans_adopted", r.adopted(a)},
          {"plans_proposed", r.proposed(a)}};
}

void print_json(const std::vector<row>& rows, const std::vector<goal>& goals,
                const forecast_bench_options& o) {
  nlohmann::json doc;
  doc["benchmark"] = "balance_forecast";
  doc["layers"] = o.layers;
  doc["windows"] = o.windows;
  doc["replan_every_windows"] = o.replan_every;
  doc["adoption_margin"] = o.margin;
  doc["keep_slack"] = o.keep_slack;
  doc["max_moved_fraction"] = o.max_moved;
  doc["tokens_per_window"] = 1000.0 * o.tokens_per_step * 8;
  doc["seeds"] = {o.seed, o.seed + o.seeds - 1};
  doc["forecast"] = {{"history_windows", o.forecast.history_windows},
                     {"recency_decay", o.forecast.recency_decay},
                     {"trend_z", o.forecast.trend_z},
                     {"horizon_windows", o.forecast.horizon_windows},
                     {"hedge", o.forecast.hedge},
                     {"observes", o.per_interval ? "interval" : "sample_window"},
                     {"trajectory_points", o.trajectory_points}};
  for (const row& r : rows) {
    nlohmann::json j = {{"cluster", r.shape->name},
                        {"loads", r.loads->name},
                        {"crossfade_windows", r.loads->crossfade_windows},
                        {"traffic", r.loads->traffic}};
    for (algorithm a : {eplb_last, planner_last, planner_forecast, planner_foresight})
      j[algorithm_names[a]] = algorithm_json(r, a);
    const double forecast = r.layer_balancedness(planner_forecast);
    j["forecast_minus_eplb"] = forecast - r.layer_balancedness(eplb_last);
    j["forecast_over_eplb"] = forecast / r.layer_balancedness(eplb_last);
    j["forecast_over_planner"] = forecast / r.layer_balancedness(planner_last);
    j["forecast_minus_planner_worst_seed"] = r.worst_gain_over(planner_last);
    doc["results"].push_back(std::move(j));
  }
  for (const goal& g : goals) {
    doc["goals"].push_back({{"goal", g.name},
                            {"value", g.value},
                            {"target", g.target},
                            {"at_most", g.at_most},
                            {"met", g.met()},
                            {"note", g.note}});
  }
  std::printf("%s\n", doc.dump().c_str());
}

}  // namespace

void add_forecast_options(CLI::App& app, bool& enabled, forecast_bench_options& o) {
  auto* forecast = app.add_flag(
      "--forecast", enabled,
      "instead of the figures above: the planner fed a forecast of the next re-plan interval, "
      "its plan polished for the loads along it, beside the planner and deepseek-eplb fed the "
      "last one, on steady loads (also with a "
      "thousandth of the tokens) and slow, medium and fast drift (crossfades of 500, 150 and 50 "
      "windows), over several seeds");
  app.add_option("--seeds", o.seeds, "with --forecast: timelines per row, seeds from --seed on")
      ->check(CLI::Range(1, 100))
      ->needs(forecast);
  app.add_option("--forecast-history", o.forecast.history_windows,
                 "with --forecast: re-plan intervals the forecast looks back over")
      ->check(CLI::Range(1, eplb::max_history_windows))
      ->needs(forecast);
  app.add_option("--forecast-decay", o.forecast.recency_decay,
                 "with --forecast: weight of an interval relative to the next newer one")
      ->check(CLI::Range(0.01, 1.0))
      ->needs(forecast);
  app.add_option("--forecast-trend-z", o.forecast.trend_z,
                 "with --forecast: standard errors a trend must clear to count nearly in full")
      ->check(CLI::Range(0.0, 100.0))
      ->needs(forecast);
  app.add_option("--forecast-horizon", o.forecast.horizon_windows,
                 "with --forecast: intervals ahead to forecast")
      ->check(CLI::Range(0.0, 8.0))
      ->needs(forecast);
  app.add_option("--hedge", o.forecast.hedge,
                 "with --forecast: spreads of its load each expert's planning load adds")
      ->check(CLI::Range(0.0, 100.0))
      ->needs(forecast);
  app.add_flag("--forecast-per-interval", o.per_interval,
               "with --forecast: the forecast observes each re-plan interval's summed counts "
               "rather than every sample window")
      ->needs(forecast);
  app.add_option("--trajectory-points", o.trajectory_points,
                 "with --forecast: points along the served interval the forecast's plan is "
                 "polished for, and adoption judged on twice as many along the next two; 0 plans "
                 "for the forecast alone, judged on its expected load")
      ->check(CLI::Range(0, 16))
      ->needs(forecast);
}

int run_balance_forecast(const forecast_bench_options& o) {
  if (status s = eplb::validate_forecast_options(o.forecast); !s) {
    std::fprintf(stderr, "brigade bench balance: %s\n", s.err().message.c_str());
    return 2;
  }
  std::vector<row> rows;
  for (const cluster_shape& shape : balance_shapes) {
    for (const drift& d : drifts) {
      row r{&shape, &d, {}};
      for (int i = 0; i < o.seeds; ++i) {
        auto runs = simulate(shape, d, o.seed + i, o);
        if (!runs) {
          std::fprintf(stderr, "brigade bench balance: seed %llu: %s\n",
                       static_cast<unsigned long long>(o.seed + i), runs.err().describe().c_str());
          return 1;
        }
        r.seeds.push_back(std::move(*runs));
      }
      rows.push_back(std::move(r));
    }
  }
  const std::vector<goal> goals = goals_of(rows);
  if (o.json) {
    print_json(rows, goals, o);
  } else {
    print_table(rows, goals, o);
  }
  return 0;
}

}  // namespace brigade::bench

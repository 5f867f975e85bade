// `brigade bench balance --forecast`: the planner fed a forecast of the next re-plan interval,
// and polished for the loads along it, beside the planner and DeepSeek's EPLB fed the last
// interval, on drifting and steady loads.
#pragma once

#include <cstdint>

#include "eplb/load_forecast.hpp"
#include "eplb/trajectory_polish.hpp"

namespace CLI {
class App;
}

namespace brigade::bench {

struct forecast_bench_options {
  int layers = 58;
  int windows = 200;      ///< Sample windows of 1000 steps per timeline.
  int replan_every = 10;  ///< Sample windows per re-plan interval: the forecast's window.
  double margin = 0.01;   ///< Adoption margin, for every algorithm.
  double keep_slack = 0.01;
  double max_moved = 0.25;
  double tokens_per_step = 4096;
  uint64_t seed = 1;  ///< The first seed; the timelines use seed, seed + 1, ...
  int seeds = 3;
  bool json = false;
  /// History, decay and horizon in re-plan intervals; the forecast observes every sample window
  /// with them restated by eplb::per_sample_window, or each interval's sum with per_interval.
  eplb::forecast_options forecast;
  bool per_interval = false;
  /// Points along the served interval that the forecast's plan is polished for (and twice as
  /// many along the next two intervals that adoption is judged on); 0: the plan for the forecast
  /// alone, judged on its expected load.
  int trajectory_points = eplb::default_trajectory_points;
};

/// Adds --forecast (into `enabled`) and the options only it reads (--seeds, the forecast's) to
/// `brigade bench balance`; the options both modes share are the caller's.
void add_forecast_options(CLI::App& app, bool& enabled, forecast_bench_options& o);

/// Simulates every cluster shape, drift speed and seed, prints the table (or one JSON object)
/// and returns the exit code.
int run_balance_forecast(const forecast_bench_options& options);

}  // namespace brigade::bench

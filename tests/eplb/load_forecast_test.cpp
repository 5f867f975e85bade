#include "eplb/load_forecast.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "eplb/planner.hpp"

using namespace brigade::eplb;

namespace {

/// A forecast that has seen `windows` in order.
load_forecast observed(const std::vector<load_matrix>& windows, const forecast_options& o = {}) {
  load_forecast f(o);
  for (const load_matrix& w : windows)
    REQUIRE(f.observe(w));
  return f;
}

}  // namespace

TEST_CASE("a steady load forecasts itself", "[eplb][forecast]") {
  const load_matrix load = {{500, 300, 150, 50}, {10, 20, 30, 940}};
  const load_forecast f = observed(std::vector<load_matrix>(6, load));
  const load_matrix expected = f.expected();
  const load_matrix planning = f.planning_load();
  for (size_t l = 0; l < load.size(); ++l) {
    for (size_t e = 0; e < load[l].size(); ++e) {
      CHECK(expected[l][e] == Approx(load[l][e]));
      CHECK(planning[l][e] == Approx(load[l][e]));
    }
  }
}

TEST_CASE("a linear ramp is forecast one step ahead", "[eplb][forecast]") {
  // Expert 0 gains 10 tokens a window, expert 1 loses them; the layer's total stays 1000.
  std::vector<load_matrix> windows;
  for (int t = 0; t < 6; ++t)
    windows.push_back({{100.0 + 10 * t, 300.0 - 10 * t, 200, 400}});
  forecast_options o;
  o.hedge = 0;
  const load_matrix expected = observed(windows, o).expected();
  CHECK(expected[0][0] == Approx(160));
  CHECK(expected[0][1] == Approx(240));
  CHECK(expected[0][2] == Approx(200));
  CHECK(expected[0][3] == Approx(400));
}

TEST_CASE("a ramp is followed once it is older than the history", "[eplb][forecast]") {
  // Nine windows with a history of four: only the last four shape the forecast.
  std::vector<load_matrix> windows;
  for (int t = 0; t < 9; ++t)
    windows.push_back(
        {{t < 5 ? 300.0 : 300.0 + 20 * (t - 4), t < 5 ? 700.0 : 700.0 - 20 * (t - 4)}});
  forecast_options o;
  o.history_windows = 4;
  o.recency_decay = 1;
  const load_forecast f = observed(windows, o);
  CHECK(f.windows() == 4);
  // Windows 5 to 8 hold 320, 340, 360, 380: the line says 400 next.
  CHECK(f.expected()[0][0] == Approx(400));
}

TEST_CASE("noise on a steady load is forecast closer than by the newest window",
          "[eplb][forecast]") {
  // Counts drawn around fixed means with Poisson-like noise: the forecast must not extrapolate
  // the noise into a trend so far that it does worse than the newest window alone.
  const std::vector<double> means = {4000, 2500, 1500, 1000, 600, 400};
  double forecast_error = 0;
  double newest_error = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 1.0);
    load_forecast f;
    load_matrix newest;
    for (int t = 0; t < 8; ++t) {
      newest = {std::vector<double>(means.size())};
      for (size_t e = 0; e < means.size(); ++e)
        newest[0][e] = means[e] + std::sqrt(means[e]) * noise(rng);
      REQUIRE(f.observe(newest));
    }
    const load_matrix expected = f.expected();
    double total = 0;
    for (double x : newest[0])
      total += x;
    double mean_total = 0;
    for (double m : means)
      mean_total += m;
    for (size_t e = 0; e < means.size(); ++e) {
      // Both on the scale of the newest window, as the forecast is.
      const double truth = means[e] / mean_total * total;
      forecast_error += std::abs(expected[0][e] - truth);
      newest_error += std::abs(newest[0][e] - truth);
    }
  }
  INFO("forecast error " << forecast_error << ", newest window's error " << newest_error);
  CHECK(forecast_error < newest_error);
}

TEST_CASE("hedging adds replicas to the most variable expert", "[eplb][forecast]") {
  // Experts 0 and 1 carry 500 tokens on average, expert 1 swinging between 250 and 750 with no
  // trend; the other fourteen carry 100 each. Planned from the forecast alone, expert 1 gets no
  // more replicas than expert 0 (its mean share is a little lower, as the total swings with it).
  std::vector<load_matrix> windows;
  for (double swing : {250.0, 750.0, 750.0, 250.0}) {
    std::vector<double> row(16, 100.0);
    row[0] = 500;
    row[1] = swing;
    windows.push_back({row});
  }
  forecast_options o;
  o.history_windows = 4;
  o.recency_decay = 1;
  planner_options p;
  p.shards = 8;
  p.slots_per_shard = 4;
  const load_matrix planning = observed(windows, o).planning_load();
  CHECK(planning[0][1] > planning[0][0]);
  const auto hedged = plan_layout(planning, p, nullptr);
  REQUIRE(hedged);
  o.hedge = 0;
  const auto unhedged = plan_layout(observed(windows, o).planning_load(), p, nullptr);
  REQUIRE(unhedged);
  CHECK(unhedged->replica_count(0, 1) <= unhedged->replica_count(0, 0));
  CHECK(hedged->replica_count(0, 1) > hedged->replica_count(0, 0));
  CHECK(hedged->replica_count(0, 1) > unhedged->replica_count(0, 1));
}

TEST_CASE("the forecast keeps each layer's total of the newest window", "[eplb][forecast]") {
  std::vector<load_matrix> windows;
  for (int t = 0; t < 5; ++t)
    windows.push_back({{100.0 + 50 * t, 900, 40.0 * t}, {1, 1, 1.0 + t}});
  const load_forecast f = observed(windows);
  for (const load_matrix& m : {f.expected(), f.planning_load()}) {
    for (size_t l = 0; l < m.size(); ++l) {
      double total = 0;
      double newest = 0;
      for (size_t e = 0; e < m[l].size(); ++e) {
        total += m[l][e];
        newest += windows.back()[l][e];
        CHECK(m[l][e] >= 0);
      }
      CHECK(total == Approx(newest));
    }
  }
}

TEST_CASE("a falling expert is not forecast below zero", "[eplb][forecast]") {
  std::vector<load_matrix> windows;
  for (int t = 0; t < 4; ++t)
    windows.push_back({{300.0 - 100 * t, 700.0 + 100 * t}});
  const load_matrix expected = observed(windows).expected();
  CHECK(expected[0][0] == 0);
  CHECK(expected[0][1] == Approx(1000));
}

TEST_CASE("a window of another shape is refused and the history kept", "[eplb][forecast]") {
  load_forecast f;
  REQUIRE(f.observe({{1, 2, 3}}));
  CHECK_FALSE(f.observe({{1, 2}}));
  CHECK_FALSE(f.observe({{1, 2, 3}, {4, 5, 6}}));
  CHECK_FALSE(f.observe({{1, -2, 3}}));
  CHECK(f.windows() == 1);
  CHECK(f.expected() == load_matrix{{1, 2, 3}});
}

TEST_CASE("a forecast without windows is empty and a cleared one starts again",
          "[eplb][forecast]") {
  load_forecast f;
  CHECK(f.expected().empty());
  CHECK(f.planning_load().empty());
  REQUIRE(f.observe({{1, 2}}));
  f.clear();
  CHECK(f.windows() == 0);
  CHECK(f.expected().empty());
  // After a clear, a window of another shape starts a new history.
  REQUIRE(f.observe({{3, 1, 0}}));
  REQUIRE(f.observe({{3, 1, 0}}));
  CHECK(f.expected() == load_matrix{{3, 1, 0}});
}

TEST_CASE("forecast options out of range are refused", "[eplb][forecast]") {
  CHECK(validate_forecast_options({}));
  auto refused = [](auto change) {
    forecast_options o;
    change(o);
    return !validate_forecast_options(o);
  };
  CHECK(refused([](forecast_options& o) { o.history_windows = 0; }));
  CHECK(refused([](forecast_options& o) { o.history_windows = max_history_windows + 1; }));
  CHECK(refused([](forecast_options& o) { o.recency_decay = 0; }));
  CHECK(refused([](forecast_options& o) { o.recency_decay = 1.5; }));
  CHECK(refused([](forecast_options& o) { o.trend_z = -1; }));
  CHECK(refused([](forecast_options& o) { o.horizon_windows = -1; }));
  CHECK(refused([](forecast_options& o) { o.hedge = std::nan(""); }));
}

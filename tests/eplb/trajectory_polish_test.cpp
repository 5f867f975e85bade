#include "eplb/trajectory_polish.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/load_forecast.hpp"
#include "tests/eplb/layout_checks.hpp"
#include "tests/eplb/random_loads.hpp"

using namespace brigade::eplb;
using namespace brigade::eplb::testing;

namespace {

/// A crossfade from one Zipf(0.65) popularity to another: the load at `progress` in [0, 1].
struct crossfade {
  load_matrix from;
  load_matrix to;

  crossfade(int layers, int experts, uint64_t seed)
      : from(random_loads(layers, experts, load_family::zipf, seed, 0.65)),
        to(random_loads(layers, experts, load_family::zipf, seed + 1000, 0.65)) {}

  load_matrix at(double progress) const {
    load_matrix out = from;
    for (size_t l = 0; l < out.size(); ++l) {
      for (size_t e = 0; e < out[l].size(); ++e)
        out[l][e] = (1 - progress) * from[l][e] + progress * to[l][e];
    }
    return out;
  }
  /// The windows of an interval from `start` to `end`, as many as `windows`, at their middles.
  std::vector<load_matrix> windows(double start, double end, int windows) const {
    std::vector<load_matrix> out;
    for (int w = 0; w < windows; ++w)
      out.push_back(at(start + (end - start) * (w + 0.5) / windows));
    return out;
  }
};

load_matrix sum_of(const std::vector<load_matrix>& windows) {
  load_matrix out = windows.front();
  for (size_t w = 1; w < windows.size(); ++w) {
    for (size_t l = 0; l < out.size(); ++l) {
      for (size_t e = 0; e < out[l].size(); ++e)
        out[l][e] += windows[w][l][e];
    }
  }
  return out;
}

/// The mean over the windows of layer_max_over_mean: the step-time factor the windows see.
double mean_imbalance(const layout& l, const std::vector<load_matrix>& windows) {
  double sum = 0;
  for (const load_matrix& w : windows)
    sum += measure_balance(l, w).layer_max_over_mean;
  return sum / windows.size();
}

planner_options options(int shards, int slots_per_shard, int nodes = 1) {
  planner_options o;
  o.shards = shards;
  o.slots_per_shard = slots_per_shard;
  o.nodes = nodes;
  return o;
}

}  // namespace

TEST_CASE("a plan polished along a drift beats the plan for its sum window by window (4 seeds)",
          "[eplb][trajectory]") {
  // A tenth of a crossfade per interval, between the medium and fast drifts of `bench balance
  // --forecast` (a fifteenth and a fifth): the sum is the interval's middle, which its windows
  // leave on either side.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    INFO("seed " << seed);
    const crossfade drift(4, 256, seed);
    const std::vector<load_matrix> windows = drift.windows(0.3, 0.4, 10);
    const planner_options o = options(32, 9);
    auto for_sum = plan_layout(sum_of(windows), o, nullptr);
    REQUIRE(for_sum);
    auto along = plan_for_trajectory(sum_of(windows), drift.windows(0.3, 0.4, 2), o, nullptr);
    REQUIRE(along);
    require_layout_invariants(*along, "seed " + std::to_string(seed));
    const double sum_planned = mean_imbalance(*for_sum, windows);
    const double polished = mean_imbalance(*along, windows);
    INFO("sum-planned " << sum_planned << ", polished " << polished);
    CHECK(polished < sum_planned - 0.005);
  }
}

TEST_CASE("a polish keeps replica counts, nodes and the move budget", "[eplb][trajectory]") {
  const crossfade drift(3, 128, 7);
  const planner_options o = options(16, 9, 2);
  auto current = plan_layout(drift.at(0.0), o, nullptr);
  REQUIRE(current);
  auto planned = plan_layout(drift.at(0.5), o, &*current);
  REQUIRE(planned);
  polish_terms terms;
  terms.nodes = 2;
  terms.max_moved_fraction = 0.25;
  auto polished = polish_for_trajectory(*planned, drift.windows(0.4, 0.6, 3), &*current, terms);
  REQUIRE(polished);
  require_layout_invariants(*polished, "polished");
  CHECK(polished->epoch() == planned->epoch());
  const int budget = static_cast<int>(0.25 * polished->slots() * polished->layers());
  CHECK(moved_slots(*current, *polished) <= std::max(budget, moved_slots(*current, *planned)));
  for (int layer = 0; layer < polished->layers(); ++layer) {
    for (int e = 0; e < polished->experts(); ++e) {
      REQUIRE(polished->replica_count(layer, e) == planned->replica_count(layer, e));
      // Swaps stay within a node: each node holds as many replicas of each expert as before.
      for (int node = 0; node < 2; ++node) {
        auto on_node = [&](const layout& l) {
          const auto& row = l.phy2log(layer);
          const int half = l.slots() / 2;
          return std::count(row.begin() + node * half, row.begin() + (node + 1) * half, e);
        };
        REQUIRE(on_node(*polished) == on_node(*planned));
      }
    }
  }
}

TEST_CASE("a polish without points or with points of another shape", "[eplb][trajectory]") {
  const crossfade drift(2, 64, 3);
  auto planned = plan_layout(drift.at(0.5), options(8, 9), nullptr);
  REQUIRE(planned);
  auto same = polish_for_trajectory(*planned, {}, nullptr, polish_terms{});
  REQUIRE(same);
  CHECK(same->phy2log() == planned->phy2log());
  const crossfade other(2, 32, 3);
  auto refused = polish_for_trajectory(*planned, {other.at(0.5)}, nullptr, polish_terms{});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message.find("trajectory") != std::string::npos);
}

TEST_CASE("adoption along a trajectory sees a layout drift out of balance", "[eplb][trajectory]") {
  // Two shards of two slots: balanced at the middle of the drift, lopsided at both ends.
  const layout_shape shape{1, 4, 2, 2};
  auto drifting = layout::from_phy2log(shape, {{0, 1, 2, 3}}, 0);
  auto steady = layout::from_phy2log(shape, {{0, 2, 1, 3}}, 0);
  REQUIRE(drifting);
  REQUIRE(steady);
  // Experts 0 and 1 gain what 2 and 3 lose.
  const std::vector<load_matrix> trajectory = {{{120, 120, 80, 80}}, {{80, 80, 120, 120}}};
  const load_matrix middle = {{100, 100, 100, 100}};
  CHECK_FALSE(judge_adoption(*drifting, *steady, middle, 0.01).adopt);
  const adoption_decision d = judge_adoption(*drifting, *steady, trajectory, 0.01);
  CHECK(d.current_imbalance == Approx(1.2));
  CHECK(d.proposed_imbalance == Approx(1.0));
  CHECK(d.adopt);
}

TEST_CASE("a forecast of sample windows runs the trend along the next interval",
          "[eplb][trajectory][forecast]") {
  forecast_options per_interval;
  per_interval.hedge = 0;
  const forecast_options o = per_sample_window(per_interval, 10);
  CHECK(o.history_windows == 40);
  CHECK(std::pow(o.recency_decay, 10) == Approx(per_interval.recency_decay));
  CHECK(o.horizon_windows == Approx(5.5));
  // Expert 0 gains 10 tokens a window from expert 1; the total stays 1000.
  load_forecast f(o);
  for (int t = 0; t < 20; ++t)
    REQUIRE(f.observe({{100.0 + 10 * t, 500.0 - 10 * t, 400}}));
  const std::vector<load_matrix> along = f.trajectory(0.5, 10.5, 2);
  REQUIRE(along.size() == 2);
  // The halves of the next ten windows have their middles 3 and 8 windows after the newest.
  CHECK(along[0][0][0] == Approx(100 + 10 * 22));
  CHECK(along[1][0][0] == Approx(100 + 10 * 27));
  CHECK(along[1][0][1] == Approx(500 - 10 * 27));
  CHECK(f.expected()[0][0] == Approx(100 + 10 * 24.5));
}

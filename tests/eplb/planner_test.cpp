#include "eplb/planner.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "eplb/balance_metrics.hpp"
#include "eplb/deepseek_eplb.hpp"
#include "tests/eplb/layout_checks.hpp"
#include "tests/eplb/random_loads.hpp"

using namespace brigade::eplb;
using namespace brigade::eplb::testing;

namespace {

std::string describe(const random_shape& s, load_family f, uint64_t seed) {
  return "seed " + std::to_string(seed) + ": " + family_name(f) + " loads, " +
         std::to_string(s.layers) + " layers x " + std::to_string(s.experts) + " experts on " +
         std::to_string(s.shards) + " shards x " + std::to_string(s.slots_per_shard) + " slots, " +
         std::to_string(s.nodes) + " nodes";
}

planner_options options_for(const random_shape& s) {
  planner_options o;
  o.shards = s.shards;
  o.slots_per_shard = s.slots_per_shard;
  o.nodes = s.nodes;
  return o;
}

/// Every layer's busiest shard over its mean shard load.
std::vector<double> layer_ratios(const layout& l, const load_matrix& load) {
  std::vector<double> ratios;
  for (int layer = 0; layer < l.layers(); ++layer) {
    const std::vector<double> per_shard = shard_loads(l, load, layer);
    double total = 0;
    double busiest = 0;
    for (double x : per_shard) {
      total += x;
      busiest = std::max(busiest, x);
    }
    ratios.push_back(total > 0 ? busiest / (total / l.shards()) : 1.0);
  }
  return ratios;
}

load_matrix drifted(const load_matrix& load, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  load_matrix out = load;
  for (auto& row : out) {
    for (double& x : row)
      x *= std::exp(noise(rng));
  }
  return out;
}

}  // namespace

TEST_CASE("planner layouts keep every invariant on random inputs", "[eplb][planner]") {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    const random_shape s = draw_shape(rng);
    const auto family = static_cast<load_family>(seed % static_cast<int>(load_family::count));
    const std::string context = describe(s, family, seed);
    const load_matrix load = random_loads(s.layers, s.experts, family, seed);
    auto fresh = plan_layout(load, options_for(s), nullptr);
    INFO(context);
    REQUIRE(fresh.ok());
    require_layout_invariants(*fresh, context + " (fresh)");
    if (s.nodes > 1) require_node_spread(*fresh, s.nodes, context + " (fresh)");
    CHECK(fresh->epoch() == 0);

    // Re-plan from a layout made for other loads, as the supervisor does every interval.
    const load_matrix next = random_loads(s.layers, s.experts, family, seed + 100000);
    auto near = plan_layout(next, options_for(s), &*fresh);
    REQUIRE(near.ok());
    require_layout_invariants(*near, context + " (from a current layout)");
    if (s.nodes > 1) require_node_spread(*near, s.nodes, context + " (from a current layout)");
    CHECK(near->epoch() == 1);

    // A current layout made without node grouping may break the node caps; the plan may not.
    auto baseline = plan_deepseek_eplb(load, s.shards, s.slots_per_shard, s.nodes);
    REQUIRE(baseline.ok());
    require_layout_invariants(*baseline, context + " (deepseek-eplb)");
    auto from_baseline = plan_layout(next, options_for(s), &*baseline);
    REQUIRE(from_baseline.ok());
    require_layout_invariants(*from_baseline, context + " (from deepseek-eplb)");
    if (s.nodes > 1) require_node_spread(*from_baseline, s.nodes, context + " (from deepseek)");
  }
}

TEST_CASE("planner balance is never worse than the DeepSeek heuristic", "[eplb][planner]") {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    random_shape s = draw_shape(rng);
    s.nodes = 1;
    const auto family = static_cast<load_family>(seed % static_cast<int>(load_family::count));
    const std::string context = describe(s, family, seed);
    INFO(context);
    const load_matrix load = random_loads(s.layers, s.experts, family, seed);
    auto planned = plan_layout(load, options_for(s), nullptr);
    auto baseline = plan_deepseek_eplb(load, s.shards, s.slots_per_shard, 1);
    REQUIRE(planned.ok());
    REQUIRE(baseline.ok());
    const std::vector<double> mine = layer_ratios(*planned, load);
    const std::vector<double> theirs = layer_ratios(*baseline, load);
    for (size_t layer = 0; layer < mine.size(); ++layer) {
      INFO("layer " << layer);
      CHECK(mine[layer] <= theirs[layer] * (1 + 1e-12));
    }
    CHECK(measure_balance(*planned, load).balancedness >=
          measure_balance(*baseline, load).balancedness * (1 - 1e-12));
  }
}

TEST_CASE("planner beats the DeepSeek heuristic on the production shapes", "[eplb][planner]") {
  struct shape {
    int experts, shards, slots_per_shard;
  };
  for (const shape& sh : {shape{384, 64, 7}, shape{256, 32, 9}}) {
    // Zipf(0.65) is the benchmark's load; at 1.1 many replicas weigh about half a shard's share
    // and the heuristic's replica counts pack badly, which count refinement repairs.
    for (double exponent : {0.65, 1.1}) {
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        INFO("seed " << seed << ", Zipf(" << exponent << "), " << sh.experts << " experts on "
                     << sh.shards << " shards");
        const load_matrix load = random_loads(58, sh.experts, load_family::zipf, seed, exponent);
        planner_options o;
        o.shards = sh.shards;
        o.slots_per_shard = sh.slots_per_shard;
        auto planned = plan_layout(load, o, nullptr);
        auto baseline = plan_deepseek_eplb(load, sh.shards, sh.slots_per_shard, 1);
        REQUIRE(planned.ok());
        REQUIRE(baseline.ok());
        const balance_report mine = measure_balance(*planned, load);
        const balance_report theirs = measure_balance(*baseline, load);
        CHECK(mine.layer_max_over_mean < theirs.layer_max_over_mean);
        CHECK(mine.balancedness > theirs.balancedness);
        CHECK(mine.layer_max_over_mean <= 1.002);
        if (exponent > 1) CHECK(theirs.layer_max_over_mean - mine.layer_max_over_mean > 0.01);
      }
    }
  }
}

TEST_CASE("re-planning the load a layout was made for moves nothing", "[eplb][planner]") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const random_shape s = draw_shape(rng);
    const std::string context = describe(s, load_family::zipf, seed);
    INFO(context);
    const load_matrix load = random_loads(s.layers, s.experts, load_family::zipf, seed);
    auto first = plan_layout(load, options_for(s), nullptr);
    REQUIRE(first.ok());
    auto again = plan_layout(load, options_for(s), &*first);
    REQUIRE(again.ok());
    CHECK(moved_slots(*first, *again) == 0);
    CHECK(again->phy2log() == first->phy2log());
  }
}

TEST_CASE("a current layout already within the slack is kept as is", "[eplb][planner]") {
  // Under Zipf(0.65) the heuristic's layout is within a fraction of a percent of the best.
  const load_matrix load = random_loads(58, 256, load_family::zipf, 7, 0.65);
  planner_options o;
  o.shards = 32;
  o.slots_per_shard = 9;
  auto baseline = plan_deepseek_eplb(load, 32, 9, 1);
  REQUIRE(baseline.ok());
  auto planned = plan_layout(load, o, &*baseline);
  REQUIRE(planned.ok());
  CHECK(moved_slots(*baseline, *planned) == 0);
}

TEST_CASE("small drift moves few slots and restores balance", "[eplb][planner]") {
  planner_options o;
  o.shards = 32;
  o.slots_per_shard = 9;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(58, 256, load_family::zipf, seed, 0.65);
    auto first = plan_layout(load, o, nullptr);
    REQUIRE(first.ok());
    const load_matrix next = drifted(load, 0.05, seed);
    auto replanned = plan_layout(next, o, &*first);
    auto fresh = plan_layout(next, o, nullptr);
    REQUIRE(replanned.ok());
    REQUIRE(fresh.ok());
    const int moved = moved_slots(*first, *replanned);
    // 5% noise on every expert's load: a sixth of the slots is plenty to rebalance, against the
    // nine tenths or so that the heuristic's stateless plan moves.
    auto heuristic = plan_deepseek_eplb(next, 32, 9, 1);
    REQUIRE(heuristic.ok());
    CHECK(moved > 0);
    CHECK(moved <= first->layers() * first->slots() / 6);
    CHECK(moved * 5 < moved_slots(*first, *heuristic));
    const double stale = measure_balance(*first, next).layer_max_over_mean;
    const double kept = measure_balance(*replanned, next).layer_max_over_mean;
    const double best = measure_balance(*fresh, next).layer_max_over_mean;
    CHECK(kept < stale);
    CHECK(kept <= best + o.keep_slack + 1e-3);
  }
}

TEST_CASE("a re-plan never moves more than its budget", "[eplb][planner]") {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    random_shape s = draw_shape(rng);
    s.nodes = 1;
    const auto family = static_cast<load_family>(seed % static_cast<int>(load_family::count));
    const std::string context = describe(s, family, seed);
    INFO(context);
    planner_options o = options_for(s);
    o.max_moved_fraction = std::uniform_real_distribution<double>(0.05, 0.5)(rng);
    INFO("budget " << o.max_moved_fraction);
    auto before = plan_layout(random_loads(s.layers, s.experts, family, seed), o, nullptr);
    REQUIRE(before.ok());
    // Unrelated loads: the fresh plan would move almost everything.
    const load_matrix next = random_loads(s.layers, s.experts, family, seed + 7777);
    auto after = plan_layout(next, o, &*before);
    REQUIRE(after.ok());
    const int k = s.slots_per_shard;
    for (int layer = 0; layer < s.layers; ++layer) {
      int moved = 0;
      for (int shard = 0; shard < s.shards; ++shard) {
        const auto first = before->phy2log(layer).begin() + shard * k;
        for (int i = 0; i < k; ++i) {
          moved += std::find(first, first + k, after->logical(layer, shard * k + i)) == first + k;
        }
      }
      // The budget never blocks the replica count changes the new load needs.
      int count_changes = 0;
      for (int e = 0; e < s.experts; ++e) {
        count_changes +=
            std::max(0, after->replica_count(layer, e) - before->replica_count(layer, e));
      }
      const int budget = static_cast<int>(o.max_moved_fraction * before->slots());
      INFO("layer " << layer);
      CHECK(moved <= std::max(budget, count_changes));
    }
  }
}

TEST_CASE("a sudden switch converges over several budgeted plans", "[eplb][planner]") {
  planner_options o;
  o.shards = 64;
  o.slots_per_shard = 7;
  const load_matrix before_load = random_loads(8, 384, load_family::zipf, 1, 0.65);
  const load_matrix after_load = random_loads(8, 384, load_family::zipf, 2, 0.65);
  auto current = plan_layout(before_load, o, nullptr);
  REQUIRE(current.ok());
  const double best =
      measure_balance(*plan_layout(after_load, o, nullptr), after_load).layer_max_over_mean;
  double previous = measure_balance(*current, after_load).layer_max_over_mean;
  for (int plan = 0; plan < 3; ++plan) {
    auto next = plan_layout(after_load, o, &*current);
    REQUIRE(next.ok());
    CHECK(moved_slots(*current, *next) <= 0.25 * next->layers() * next->slots());
    const double now = measure_balance(*next, after_load).layer_max_over_mean;
    CHECK(now <= previous);
    previous = now;
    current = std::move(next);
  }
  CHECK(previous <= best + o.keep_slack + 1e-3);
}

TEST_CASE("node grouping spreads replicas and balances nodes", "[eplb][planner]") {
  planner_options o;
  o.shards = 32;
  o.slots_per_shard = 9;
  o.nodes = 4;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(8, 256, load_family::zipf, seed, 0.65);
    auto planned = plan_layout(load, o, nullptr);
    REQUIRE(planned.ok());
    require_node_spread(*planned, o.nodes, "seed " + std::to_string(seed));
    // Node load is the sum of its shards, so it is balanced whenever the shards are; check it.
    for (int layer = 0; layer < planned->layers(); ++layer) {
      const std::vector<double> per_shard = shard_loads(*planned, load, layer);
      std::vector<double> per_node(o.nodes, 0.0);
      double total = 0;
      for (int s = 0; s < o.shards; ++s) {
        per_node[s / (o.shards / o.nodes)] += per_shard[s];
        total += per_shard[s];
      }
      for (double n : per_node)
        CHECK(n <= 1.01 * total / o.nodes);
    }
    auto next = plan_layout(drifted(load, 0.2, seed), o, &*planned);
    REQUIRE(next.ok());
    require_node_spread(*next, o.nodes, "re-planned, seed " + std::to_string(seed));
  }
}

TEST_CASE("planner rejects input it cannot plan", "[eplb][planner]") {
  planner_options o;
  o.shards = 4;
  o.slots_per_shard = 2;
  const load_matrix good(2, std::vector<double>(6, 1.0));
  auto expect_error = [&](const load_matrix& load, const planner_options& opts,
                          const layout* current, const std::string& fragment) {
    auto r = plan_layout(load, opts, current);
    REQUIRE_FALSE(r.ok());
    INFO(r.err().message);
    CHECK(r.err().message.find(fragment) != std::string::npos);
  };
  expect_error(load_matrix{}, o, nullptr, "no layers");
  expect_error(load_matrix{{1, 2, 3, 4, 5, 6}, {1, 2, 3}}, o, nullptr, "ragged");
  expect_error(load_matrix{{1, 2, 3, 4, 5, -6}}, o, nullptr, "non-negative");
  expect_error(load_matrix{{1, 2, 3, 4, 5, NAN}}, o, nullptr, "finite");
  expect_error(load_matrix{std::vector<double>(9, 1.0)}, o, nullptr, "cannot hold 9 experts");
  planner_options wide = o;
  wide.slots_per_shard = 7;
  expect_error(good, wide, nullptr, "exceed the 6 experts");
  planner_options odd_nodes = o;
  odd_nodes.nodes = 3;
  expect_error(good, odd_nodes, nullptr, "do not divide");
  auto current = plan_layout(load_matrix(3, std::vector<double>(6, 1.0)), o, nullptr);
  REQUIRE(current.ok());
  expect_error(good, o, &*current, "current layout has 3 layers");
}

#include <catch2/catch.hpp>

#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"

using namespace brigade::eplb;

namespace {

// 2 layers, 2 shards x 2 slots, 3 experts (expert 0 replicated on both shards).
const layout_shape shape{2, 3, 2, 2};

layout make(std::vector<std::vector<int32_t>> phy2log) {
  auto l = layout::from_phy2log(shape, std::move(phy2log), 0);
  REQUIRE(l.ok());
  return std::move(*l);
}

}  // namespace

TEST_CASE("balance metrics split a replicated expert's load evenly", "[eplb][metrics]") {
  const layout l = make({{0, 1, 0, 2}, {0, 1, 0, 2}});
  const load_matrix load{{40, 10, 30}, {40, 30, 10}};
  // Layer 0: shard 0 = 20 + 10 = 30, shard 1 = 20 + 30 = 50. Layer 1: 50 and 30.
  CHECK(shard_loads(l, load, 0) == std::vector<double>{30, 50});
  const balance_report b = measure_balance(l, load);
  // Summed over layers both shards carry 80: perfectly balanced.
  CHECK(b.balancedness == Approx(1.0));
  CHECK(b.max_over_mean == Approx(1.0));
  // Per layer the busiest shard carries 50 against a mean of 40 in both layers.
  CHECK(b.layer_max_over_mean == Approx(50.0 / 40.0));
  CHECK(b.worst_layer_max_over_mean == Approx(1.25));
}

TEST_CASE("an idle load counts as balanced", "[eplb][metrics]") {
  const balance_report b =
      measure_balance(make({{0, 1, 0, 2}, {0, 1, 0, 2}}), load_matrix{{0, 0, 0}, {0, 0, 0}});
  CHECK(b.balancedness == 1.0);
  CHECK(b.layer_max_over_mean == 1.0);
}

TEST_CASE("moved slots count experts new to a shard, not slot order", "[eplb][metrics]") {
  const layout a = make({{0, 1, 0, 2}, {0, 1, 0, 2}});
  CHECK(moved_slots(a, a) == 0);
  // Reordering a shard's own slots moves no weights.
  CHECK(moved_slots(a, make({{1, 0, 2, 0}, {0, 1, 0, 2}})) == 0);
  // Swapping experts 1 and 2 between the shards of layer 1 copies two experts.
  CHECK(moved_slots(a, make({{0, 1, 0, 2}, {0, 2, 0, 1}})) == 2);
}

TEST_CASE("adoption needs a gain above the margin and at least one move", "[eplb][adoption]") {
  const load_matrix load{{40, 30, 10}, {40, 30, 10}};
  const layout stale = make({{0, 2, 0, 1}, {0, 2, 0, 1}});   // shards 30 and 50 in each layer
  const layout better = make({{0, 1, 0, 2}, {0, 1, 0, 2}});  // shards 50 and 30: no better
  const adoption_decision same = judge_adoption(stale, stale, load, 0.0);
  CHECK_FALSE(same.adopt);
  CHECK(same.moved_slots == 0);
  const adoption_decision mirror = judge_adoption(stale, better, load, 0.01);
  CHECK_FALSE(mirror.adopt);
  CHECK(mirror.gain == Approx(0.0));

  // Two shards of two slots: the second layout replicates the hot expert instead of expert 1.
  const layout_shape wide{1, 3, 2, 2};
  auto lopsided = layout::from_phy2log(wide, {{0, 1, 2, 1}}, 0);
  auto even = layout::from_phy2log(wide, {{0, 1, 0, 2}}, 0);
  REQUIRE(lopsided.ok());
  REQUIRE(even.ok());
  const load_matrix skewed{{60, 10, 10}};
  // lopsided: shards 60 + 5 = 65 and 10 + 5 = 15; even: 30 + 10 = 40 on both.
  const adoption_decision d = judge_adoption(*lopsided, *even, skewed, 0.2);
  CHECK(d.current_imbalance == Approx(65.0 / 40.0));
  CHECK(d.proposed_imbalance == Approx(1.0));
  CHECK(d.gain == Approx(25.0 / 65.0));
  CHECK(d.moved_slots == 1);
  CHECK(d.adopt);
  CHECK_FALSE(judge_adoption(*lopsided, *even, skewed, 0.5).adopt);
}

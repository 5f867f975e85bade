// Node-aware numbering of a plan's shards: the same balance, copies kept within nodes.
#include "eplb/node_alignment.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "eplb/balance_metrics.hpp"

using namespace brigade::eplb;

namespace {

layout make(int shards, int per, std::vector<int32_t> map, uint64_t epoch = 0) {
  layout_shape shape;
  shape.layers = 1;
  shape.experts = 8;
  shape.shards = shards;
  shape.slots_per_shard = per;
  return layout::from_phy2log(shape, {std::move(map)}, epoch).value();
}

}  // namespace

TEST_CASE("numbering for the nodes never costs more than the planner's numbering",
          "[eplb][nodes]") {
  const std::vector<int> nodes = {0, 0, 1, 1};
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<int32_t> a = {0, 1, 2, 3, 4, 5, 6, 7}, b = a;
    std::shuffle(a.begin(), a.end(), rng);
    std::shuffle(b.begin(), b.end(), rng);
    const layout current = make(4, 2, a);
    const layout proposed = make(4, 2, b, 1);
    const layout aligned = align_to_nodes(current, proposed, nodes, 2.0);
    CHECK(measure_moves(current, aligned, nodes, 2.0).units <=
          measure_moves(current, proposed, nodes, 2.0).units);
    // The same shard sets, only numbered differently.
    std::multiset<std::set<int32_t>> want, got;
    for (int shard = 0; shard < 4; ++shard) {
      want.insert({b[2 * shard], b[2 * shard + 1]});
      got.insert({aligned.logical(0, 2 * shard), aligned.logical(0, 2 * shard + 1)});
    }
    CHECK(want == got);
    CHECK(aligned.epoch() == 1);
  }
}

TEST_CASE("renumbering whole shards keeps every shard's set and so the layer's balance",
          "[eplb][nodes]") {
  const std::vector<int> nodes = {0, 0, 1, 1};
  const layout current = make(4, 2, {0, 1, 2, 3, 4, 5, 6, 7});
  // The plan swaps the contents of shard 0 (node 0) and shard 2 (node 1) and of 1 and 3:
  // numbered back, nothing moves at all.
  const layout proposed = make(4, 2, {4, 5, 6, 7, 0, 1, 2, 3}, 1);
  CHECK(measure_moves(current, proposed, nodes, 2.0).across_nodes == 8);
  const layout aligned = align_to_nodes(current, proposed, nodes, 2.0);
  const move_cost after = measure_moves(current, aligned, nodes, 2.0);
  CHECK(after.moved_slots == 0);
  CHECK(after.units == 0.0);
  const std::vector<std::vector<double>> load = {{8, 7, 6, 5, 4, 3, 2, 1}};
  CHECK(measure_balance(aligned, load).balancedness ==
        Approx(measure_balance(proposed, load).balancedness));
}

TEST_CASE("a copy counts one from a shard of the same node and more from another node",
          "[eplb][nodes]") {
  // Shards 0 and 1 on node 0, 2 and 3 on node 1; three slots each, 8 experts, 4 replicas.
  const std::vector<int> nodes = {0, 0, 1, 1};
  const layout current = make(4, 3, {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3});
  // Shard 0 takes expert 4 (shard 1 holds it: node 0) and shard 2 takes expert 5 (only node 0
  // holds it): one copy within a node, one across.
  const layout proposed = make(4, 3, {0, 1, 4, 3, 4, 5, 6, 7, 5, 1, 2, 3}, 1);
  const move_cost cost = measure_moves(current, proposed, nodes, 3.0);
  CHECK(cost.moved_slots == 2);
  CHECK(cost.within_node == 1);
  CHECK(cost.across_nodes == 1);
  CHECK(cost.units == 4.0);
  // On one node every copy counts one.
  CHECK(measure_moves(current, proposed, {}, 3.0).units == 2.0);
}

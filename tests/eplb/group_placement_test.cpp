// Expert groups kept on one node each (planner_options::groups_per_node) and the DeepSeek
// baseline given real groups: placement, balance over nodes, re-plans and refusals.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "eplb/balance_metrics.hpp"
#include "eplb/deepseek_eplb.hpp"
#include "eplb/expert_groups.hpp"
#include "eplb/planner.hpp"
#include "tests/eplb/layout_checks.hpp"
#include "tests/eplb/random_loads.hpp"

using namespace brigade::eplb;
using namespace brigade::eplb::testing;

namespace {

/// A random shape that can keep groups on nodes: groups divisible by nodes, slots per shard at
/// most the experts of one node.
struct grouped_shape {
  int layers, experts, groups, nodes, shards, slots_per_shard;
};

grouped_shape draw_grouped_shape(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  grouped_shape s{};
  s.layers = pick(1, 3);
  s.nodes = pick(2, 4);
  s.groups = s.nodes * pick(1, 3);
  s.experts = s.groups * pick(1, 8);
  s.shards = s.nodes * pick(1, 4);
  const int node_experts = s.experts / s.nodes;
  const int least_k = (s.experts + s.shards - 1) / s.shards;
  s.slots_per_shard = std::min(node_experts, least_k + pick(0, 2));
  if (s.slots_per_shard < least_k) {
    // Too few slots per node for its experts: more shards per node.
    s.shards = s.nodes * ((node_experts + s.slots_per_shard - 1) / s.slots_per_shard);
  }
  return s;
}

std::string describe(const grouped_shape& s, load_family f, uint64_t seed) {
  return "seed " + std::to_string(seed) + ": " + family_name(f) + " loads, " +
         std::to_string(s.layers) + " layers x " + std::to_string(s.experts) + " experts in " +
         std::to_string(s.groups) + " groups on " + std::to_string(s.nodes) + " nodes of " +
         std::to_string(s.shards / s.nodes) + " shards x " + std::to_string(s.slots_per_shard) +
         " slots";
}

planner_options grouped_options(int shards, int slots_per_shard, int nodes, int groups) {
  planner_options o;
  o.shards = shards;
  o.slots_per_shard = slots_per_shard;
  o.nodes = nodes;
  o.expert_groups = groups;
  o.groups_per_node = true;
  return o;
}

/// Every group on one node, and every node holding the same number of groups.
void require_groups_on_nodes(const layout& l, int nodes, int groups, const std::string& context) {
  INFO(context);
  for (int layer = 0; layer < l.layers(); ++layer) {
    INFO("layer " << layer);
    std::vector<int> per_node(nodes, 0);
    for (int n : group_nodes_of(l, layer, nodes, groups)) {
      REQUIRE(n >= 0);
      ++per_node[n];
    }
    for (int held : per_node)
      CHECK(held == groups / nodes);
  }
}

/// Each layer's node loads: the summed loads of the experts of the groups on each node.
std::vector<std::vector<double>> node_loads_of(const layout& l, const load_matrix& load, int nodes,
                                               int groups) {
  std::vector<std::vector<double>> out;
  const int per_group = l.experts() / groups;
  for (int layer = 0; layer < l.layers(); ++layer) {
    const std::vector<int> node = group_nodes_of(l, layer, nodes, groups);
    std::vector<double> sums(nodes, 0.0);
    for (int e = 0; e < l.experts(); ++e)
      sums[node[e / per_group]] += load[layer][e];
    out.push_back(sums);
  }
  return out;
}

/// The least heaviest-node load any split of 8 groups into 4 pairs reaches (105 pairings).
double best_pairing(std::vector<double> g) {
  std::sort(g.begin(), g.end());
  double best = 1e300;
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  do {
    if (!(order[0] < order[1] && order[2] < order[3] && order[4] < order[5] &&
          order[6] < order[7] && order[0] < order[2] && order[2] < order[4] && order[4] < order[6]))
      continue;
    double heaviest = 0;
    for (int p = 0; p < 8; p += 2)
      heaviest = std::max(heaviest, g[order[p]] + g[order[p + 1]]);
    best = std::min(best, heaviest);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

/// Slots of `after` whose expert the same shard of `before` did not hold, per layer, minus the
/// replica count increases (which the budget never blocks).
std::vector<int> moves_beyond_count_changes(const layout& before, const layout& after) {
  std::vector<int> out;
  const int k = before.slots_per_shard();
  for (int layer = 0; layer < before.layers(); ++layer) {
    int moved = 0;
    for (int shard = 0; shard < before.shards(); ++shard) {
      const auto first = before.phy2log(layer).begin() + shard * k;
      for (int i = 0; i < k; ++i)
        moved += std::find(first, first + k, after.logical(layer, shard * k + i)) == first + k;
    }
    for (int e = 0; e < before.experts(); ++e)
      moved -= std::max(0, after.replica_count(layer, e) - before.replica_count(layer, e));
    out.push_back(moved);
  }
  return out;
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

/// `load` with every expert of `group` (of `groups`) `factor` times as busy.
load_matrix with_group_scaled(load_matrix load, int groups, int group, double factor) {
  for (auto& row : load) {
    const int per_group = static_cast<int>(row.size()) / groups;
    for (int e = group * per_group; e < (group + 1) * per_group; ++e)
      row[e] *= factor;
  }
  return load;
}

}  // namespace

TEST_CASE("groups per node keeps each group's replicas on one node on random inputs",
          "[eplb][groups]") {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const grouped_shape s = draw_grouped_shape(rng);
    const auto family = static_cast<load_family>(seed % static_cast<int>(load_family::count));
    const std::string context = describe(s, family, seed);
    INFO(context);
    const planner_options o = grouped_options(s.shards, s.slots_per_shard, s.nodes, s.groups);
    const load_matrix load = random_loads(s.layers, s.experts, family, seed);
    auto fresh = plan_layout(load, o, nullptr);
    REQUIRE(fresh.ok());
    require_layout_invariants(*fresh, context + " (fresh)");
    require_groups_on_nodes(*fresh, s.nodes, s.groups, context + " (fresh)");

    const load_matrix next = random_loads(s.layers, s.experts, family, seed + 100000);
    auto near = plan_layout(next, o, &*fresh);
    REQUIRE(near.ok());
    require_layout_invariants(*near, context + " (from a current layout)");
    require_groups_on_nodes(*near, s.nodes, s.groups, context + " (from a current layout)");

    // A current layout that spreads groups over nodes is brought to one node per group.
    planner_options free = o;
    free.groups_per_node = false;
    auto spread = plan_layout(load, free, nullptr);
    REQUIRE(spread.ok());
    auto regrouped = plan_layout(next, o, &*spread);
    REQUIRE(regrouped.ok());
    require_layout_invariants(*regrouped, context + " (from a free layout)");
    require_groups_on_nodes(*regrouped, s.nodes, s.groups, context + " (from a free layout)");

    auto baseline = plan_deepseek_eplb(load, s.shards, s.slots_per_shard, s.nodes, s.groups);
    REQUIRE(baseline.ok());
    require_layout_invariants(*baseline, context + " (deepseek-eplb)");
    require_groups_on_nodes(*baseline, s.nodes, s.groups, context + " (deepseek-eplb)");
  }
}

TEST_CASE("groups are balanced over nodes, 256 experts in 8 groups on 4 nodes of 8x9",
          "[eplb][groups]") {
  const planner_options o = grouped_options(32, 9, 4, 8);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(8, 256, load_family::zipf, seed, 0.65);
    auto planned = plan_layout(load, o, nullptr);
    auto baseline = plan_deepseek_eplb(load, 32, 9, 4, 8);
    REQUIRE(planned.ok());
    REQUIRE(baseline.ok());
    const auto nodes = node_loads_of(*planned, load, 4, 8);
    const auto baseline_nodes = node_loads_of(*baseline, load, 4, 8);
    for (int layer = 0; layer < planned->layers(); ++layer) {
      INFO("layer " << layer);
      std::vector<double> groups(8, 0.0);
      for (int e = 0; e < 256; ++e)
        groups[e / 32] += load[layer][e];
      const double best = best_pairing(groups);
      const double mine = *std::max_element(nodes[layer].begin(), nodes[layer].end());
      const double theirs =
          *std::max_element(baseline_nodes[layer].begin(), baseline_nodes[layer].end());
      CHECK(mine <= best * (1 + 1e-9));
      CHECK(theirs >= best * (1 - 1e-9));
      // Within a node the shards share the node's load evenly.
      const std::vector<double> shards = shard_loads(*planned, load, layer);
      const double busiest = *std::max_element(shards.begin(), shards.end());
      CHECK(busiest <= 1.01 * mine / 8);
    }
  }
}

TEST_CASE("a re-plan keeps groups on their nodes while the balance allows", "[eplb][groups]") {
  const planner_options o = grouped_options(32, 9, 4, 8);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(8, 256, load_family::zipf, seed, 0.65);
    auto first = plan_layout(load, o, nullptr);
    REQUIRE(first.ok());
    auto again = plan_layout(load, o, &*first);
    REQUIRE(again.ok());
    CHECK(moved_slots(*first, *again) == 0);
    const load_matrix next = drifted(load, 0.05, seed);
    auto replanned = plan_layout(next, o, &*first);
    REQUIRE(replanned.ok());
    for (int layer = 0; layer < first->layers(); ++layer) {
      INFO("layer " << layer);
      CHECK(group_nodes_of(*replanned, layer, 4, 8) == group_nodes_of(*first, layer, 4, 8));
    }
    CHECK(moved_slots(*first, *replanned) <= first->layers() * first->slots() / 6);
    CHECK(measure_balance(*replanned, next).layer_max_over_mean <=
          measure_balance(*first, next).layer_max_over_mean);
  }
}

TEST_CASE("a re-plan moves whole groups when balance needs it, within the move budget",
          "[eplb][groups]") {
  planner_options o = grouped_options(32, 9, 4, 8);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(4, 256, load_family::zipf, seed, 0.65);
    auto first = plan_layout(load, o, nullptr);
    REQUIRE(first.ok());
    // Both groups of the node holding group 0 become three times as busy: only moving one of
    // them to another node balances the nodes again.
    const std::vector<int> home = group_nodes_of(*first, 0, 4, 8);
    int partner = 1;
    while (home[partner] != home[0])
      ++partner;
    const load_matrix hot = with_group_scaled(with_group_scaled(load, 8, 0, 3), 8, partner, 3);
    o.max_moved_fraction = 0.3;
    auto moved = plan_layout(hot, o, &*first);
    REQUIRE(moved.ok());
    require_groups_on_nodes(*moved, 4, 8, "after the shift");
    const std::vector<int> after = group_nodes_of(*moved, 0, 4, 8);
    CHECK(after[0] != after[partner]);
    CHECK(measure_balance(*moved, hot).layer_max_over_mean <
          0.95 * measure_balance(*first, hot).layer_max_over_mean);
    const int budget = static_cast<int>(o.max_moved_fraction * first->slots());
    for (int beyond : moves_beyond_count_changes(*first, *moved))
      CHECK(beyond <= budget);
    // What the budget left undone, the next plans finish.
    auto second = plan_layout(hot, o, &*moved);
    REQUIRE(second.ok());
    auto third = plan_layout(hot, o, &*second);
    REQUIRE(third.ok());
    auto fresh = plan_layout(hot, o, nullptr);
    REQUIRE(fresh.ok());
    CHECK(measure_balance(*third, hot).layer_max_over_mean <=
          measure_balance(*fresh, hot).layer_max_over_mean + o.keep_slack + 0.01);

    // A budget smaller than one group's slots moves no group.
    o.max_moved_fraction = 0.05;
    auto held = plan_layout(hot, o, &*first);
    REQUIRE(held.ok());
    for (int layer = 0; layer < first->layers(); ++layer) {
      CHECK(group_nodes_of(*held, layer, 4, 8) == group_nodes_of(*first, layer, 4, 8));
    }
    const int small_budget = static_cast<int>(o.max_moved_fraction * first->slots());
    for (int beyond : moves_beyond_count_changes(*first, *held))
      CHECK(beyond <= small_budget);
  }
}

TEST_CASE("group options that cannot apply are refused, naming the option", "[eplb][groups]") {
  const load_matrix load(2, std::vector<double>(16, 1.0));
  auto expect_error = [&](const planner_options& o, const std::string& a, const std::string& b) {
    auto r = plan_layout(load, o, nullptr);
    REQUIRE_FALSE(r.ok());
    INFO(r.err().message);
    CHECK(r.err().message.find(a) != std::string::npos);
    CHECK(r.err().message.find(b) != std::string::npos);
  };
  expect_error(grouped_options(4, 5, 1, 4), "groups_per_node", "more than one node");
  expect_error(grouped_options(4, 5, 2, 3), "expert_groups (3) must divide the 16 experts", "");
  expect_error(grouped_options(6, 3, 3, 4), "expert_groups (4) divisible by nodes (3)",
               "groups_per_node");
  expect_error(grouped_options(8, 3, 8, 8), "2 experts on each of 8 nodes", "3 slots");
  expect_error(grouped_options(4, 5, 2, 0), "expert_groups (0)", "");
  planner_options free = grouped_options(4, 5, 1, 3);
  free.groups_per_node = false;
  expect_error(free, "expert_groups (3) must divide", "");
  free.expert_groups = 4;
  CHECK(plan_layout(load, free, nullptr).ok());

  // The baseline refuses the same groups with the same words.
  auto baseline = plan_deepseek_eplb(load, 6, 3, 3, 4);
  REQUIRE_FALSE(baseline.ok());
  CHECK(baseline.err().message.find("divisible by nodes (3)") != std::string::npos);
  CHECK(plan_deepseek_eplb(load, 4, 5, 1, 4).ok());
}

TEST_CASE("the DeepSeek baseline's default groups are its experts", "[eplb][groups]") {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    INFO("seed " << seed);
    const load_matrix load = random_loads(4, 64, load_family::zipf, seed);
    auto by_default = plan_deepseek_eplb(load, 16, 5, 4);
    auto single = plan_deepseek_eplb(load, 16, 5, 4, 64);
    REQUIRE(by_default.ok());
    REQUIRE(single.ok());
    CHECK(by_default->phy2log() == single->phy2log());
  }
}

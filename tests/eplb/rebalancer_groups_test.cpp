// The supervisor's balancing with eplb.group_placement: node: its plans keep every expert group
// on one node, the initial layout (which splits a group) is left at the first plan, and groups the
// model cannot keep on the nodes are refused with an event that says why.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "actors/shard_set.hpp"
#include "deploy/rebalancer.hpp"
#include "eplb/expert_groups.hpp"
#include "tests/eplb/random_loads.hpp"

using namespace brigade;

namespace {

// 2 MoE layers of 32 experts in 8 groups, on 8 shards of 5 slots.
model::model_config grouped_model(int expert_groups) {
  model::model_config c;
  c.num_layers = 2;
  c.num_experts = 32;
  c.expert_groups = expert_groups;
  c.topk_groups = 2;
  c.hidden_size = 64;
  c.expert_intermediate = 32;
  return c;
}

deploy::rebalance_options grouped_options(int nodes) {
  deploy::rebalance_options o;
  o.sample_interval_steps = 1000;
  o.replan_interval_steps = 1000;  // a plan after every window
  o.groups_per_node = true;
  o.nodes = nodes;
  return o;
}

/// Every shard reports its share of one window of Zipf loads.
void report_window(deploy::rebalancer& r, uint64_t window, uint64_t seed) {
  const eplb::load_matrix load =
      eplb::testing::random_loads(2, 32, eplb::testing::load_family::zipf, seed, 0.65);
  for (int shard = 0; shard < 8; ++shard) {
    std::vector<std::vector<int64_t>> tokens(2, std::vector<int64_t>(32, 0));
    for (int layer = 0; layer < 2; ++layer) {
      for (int e = 0; e < 32; ++e)
        tokens[layer][e] = static_cast<int64_t>(load[layer][e] / 8);
    }
    r.add_sample(shard, window, tokens);
  }
}

bool has_event(const deploy::rebalancer& r, const std::string& kind, const std::string& text) {
  for (const auto& ev : r.events()) {
    if (ev.kind == kind && ev.detail.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("live plans with group placement keep every group on one node", "[eplb][groups]") {
  const auto model = grouped_model(8);
  auto initial = actors::initial_layout(model, 8, 5);
  REQUIRE(initial.ok());
  // Slot s holds expert s mod 32: the spare slots of the last node repeat group 0 and 1.
  REQUIRE_FALSE(eplb::groups_stay_on_nodes(*initial, 4, 8));
  deploy::rebalancer r(model, *initial, grouped_options(4));
  report_window(r, 0, 1);
  const auto first = r.plan_if_due();
  REQUIRE(first.has_value());
  CHECK(eplb::groups_stay_on_nodes(*first, 4, 8));
  CHECK(has_event(r, "plan_adopted", "brings every expert group onto one node"));
  r.adopt(*first, 0.1);
  for (uint64_t w = 1; w <= 4; ++w) {
    report_window(r, w, 1 + w);
    if (auto next = r.plan_if_due()) {
      CHECK(eplb::groups_stay_on_nodes(*next, 4, 8));
      r.adopt(*next, 0.1);
    }
  }
  CHECK(eplb::groups_stay_on_nodes(r.current(), 4, 8));
}

TEST_CASE("groups the nodes cannot hold are refused with an event, and experts placed freely",
          "[eplb][groups]") {
  const auto model = grouped_model(2);
  auto initial = actors::initial_layout(model, 8, 5);
  REQUIRE(initial.ok());
  deploy::rebalancer r(model, *initial, grouped_options(4));
  CHECK(has_event(r, "group_placement_refused", "expert_groups (2) divisible by nodes (4)"));
  CHECK(has_event(r, "group_placement_refused", "eplb.group_placement"));
  report_window(r, 0, 1);
  const auto plan = r.plan_if_due();
  REQUIRE(plan.has_value());
  CHECK_FALSE(eplb::groups_stay_on_nodes(*plan, 4, 2));
}

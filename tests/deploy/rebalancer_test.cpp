// Random re-plans (tests and fault injection): a whole reshuffle, or a planner-sized migration
// that moves about the asked fraction of the slots; both valid layouts.
#include "deploy/rebalancer.hpp"

#include "actors/shard_set.hpp"

#include <catch2/catch.hpp>

using namespace brigade;

namespace {

// 4 layers of 32 experts on 4 shards of 10 slots.
model::model_config config() {
  model::model_config c;
  c.num_layers = 4;
  c.num_experts = 32;
  c.hidden_size = 64;
  c.expert_intermediate = 32;
  return c;
}

eplb::layout initial_layout() {
  auto initial = actors::initial_layout(config(), 4, 10);
  REQUIRE(initial.ok());
  return initial.value();
}

// Every invariant of a layout, checked again from its numbers.
bool valid(const eplb::layout& l) {
  return eplb::layout::from_phy2log(l.shape(), l.phy2log(), l.epoch()).ok();
}

}  // namespace

TEST_CASE("random re-plans are valid and move about the asked fraction", "[eplb]") {
  const auto initial = initial_layout();
  deploy::rebalancer r(config(), initial, {});
  const int slots = 4 * 4 * 10;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    const auto small = r.random_layout(seed, 0.2);
    REQUIRE(valid(small));
    CHECK(small.epoch() == initial.epoch() + 1);
    const int moved = r.moved_slots(small);
    CHECK(moved > 0);
    CHECK(moved <= slots / 4);
    const auto full = r.random_layout(seed);
    REQUIRE(valid(full));
    CHECK(r.moved_slots(full) > moved);
  }
}

TEST_CASE("a random re-plan moving no slots changes only the epoch", "[eplb]") {
  const auto initial = initial_layout();
  deploy::rebalancer r(config(), initial, {});
  const auto none = r.random_layout(7, 0.0);
  CHECK(none.epoch() == initial.epoch() + 1);
  CHECK(r.moved_slots(none) == 0);
  CHECK(none.phy2log() == initial.phy2log());
  // The smallest fraction above zero still moves something: one swap per layer.
  CHECK(r.moved_slots(r.random_layout(7, 0.001)) > 0);
}

TEST_CASE("a load sample with too few layers or a negative count is ignored", "[eplb]") {
  deploy::rebalancer r(config(), initial_layout(), {});
  const std::vector<std::vector<int64_t>> good(4, std::vector<int64_t>(32, 5));
  // Three shards report; the fourth's first report is malformed and does not count.
  for (int shard = 0; shard < 3; ++shard)
    CHECK_FALSE(r.add_sample(shard, 1, good));
  const std::vector<std::vector<int64_t>> short_rows(2, std::vector<int64_t>(32, 5));
  CHECK_FALSE(r.add_sample(3, 1, short_rows));
  auto negative = good;
  negative[2][7] = -1000;
  CHECK_FALSE(r.add_sample(3, 1, negative));
  CHECK_FALSE(r.add_sample(3, 1, {}));
  // Its good report closes the window, measured as if the bad ones had never come.
  CHECK(r.add_sample(3, 1, good));
  deploy::rebalancer reference(config(), initial_layout(), {});
  for (int shard = 0; shard < 4; ++shard)
    reference.add_sample(shard, 1, good);
  CHECK(r.last_balancedness() == reference.last_balancedness());
  CHECK(r.to_json({}) == reference.to_json({}));
}

TEST_CASE("a load sample of no shard or far ahead of the others is ignored", "[eplb]") {
  deploy::rebalancer r(config(), initial_layout(), {});
  const std::vector<std::vector<int64_t>> good(4, std::vector<int64_t>(32, 5));
  CHECK(r.next_window() == 0);
  CHECK_FALSE(r.add_sample(-1, 0, good));
  CHECK_FALSE(r.add_sample(4, 0, good));
  CHECK(r.next_window() == 0);
  // A window far past any reported one would never close: it is not let in, and moves nothing.
  CHECK_FALSE(r.add_sample(0, deploy::rebalancer::max_window_lead + 1, good));
  CHECK_FALSE(r.add_sample(0, UINT64_MAX, good));
  CHECK(r.next_window() == 0);
  for (int shard = 0; shard < 3; ++shard)
    CHECK_FALSE(r.add_sample(shard, 0, good));
  CHECK(r.add_sample(3, 0, good));
  CHECK(r.next_window() == 1);
  // Within the lead, a window may run ahead: one shard reported it, and it is the newest.
  CHECK_FALSE(r.add_sample(2, 5, good));
  CHECK(r.next_window() == 6);
}

TEST_CASE("windows a shard never reports do not pile up", "[eplb]") {
  deploy::rebalancer r(config(), initial_layout(), {});
  const std::vector<std::vector<int64_t>> good(4, std::vector<int64_t>(32, 5));
  // Shard 3 is gone for good: thousands of windows stay open, only the newest are kept, and once
  // it is back the windows it reports close again.
  for (uint64_t w = 0; w < 5000; ++w) {
    for (int shard = 0; shard < 3; ++shard)
      REQUIRE_FALSE(r.add_sample(shard, w, good));
  }
  CHECK(r.next_window() == 5000);
  CHECK(r.open_windows() <= 2 * deploy::rebalancer::max_window_lead);
  const uint64_t back = r.next_window();
  for (int shard = 0; shard < 3; ++shard)
    CHECK_FALSE(r.add_sample(shard, back, good));
  CHECK(r.add_sample(3, back, good));
}

namespace {

// One window in which shard s counts counts[s] rows (all in layer 0, on an expert it holds).
void close_window(deploy::rebalancer& r, uint64_t window, const std::vector<int64_t>& counts) {
  for (int shard = 0; shard < 4; ++shard) {
    std::vector<std::vector<int64_t>> tokens(4, std::vector<int64_t>(32, 0));
    tokens[0][static_cast<size_t>(shard) * 8] = counts[static_cast<size_t>(shard)];
    r.add_sample(shard, window, tokens);
  }
}

// Whether plan_if_due planned (adopted or rejected) after the window just closed.
bool planned(deploy::rebalancer& r) {
  const int64_t rejected = r.rejected();
  const bool proposal = r.plan_if_due().has_value();
  return proposal || r.rejected() > rejected;
}

}  // namespace

TEST_CASE("a lopsided window brings the plan forward only past counting noise", "[eplb]") {
  deploy::rebalance_options o;
  o.sample_interval_steps = 1;
  o.replan_interval_steps = 100;  // the cadence never comes in this test
  o.early_replan_above = 1.09;
  SECTION("a small window, 1.33x by chance: 15 rows over a mean of 45 is within 3 x sqrt(45)") {
    deploy::rebalancer r(config(), initial_layout(), o);
    close_window(r, 0, {60, 40, 40, 40});
    CHECK_FALSE(planned(r));
  }
  SECTION("the same shares over a hundred times the rows are drift, not noise") {
    deploy::rebalancer r(config(), initial_layout(), o);
    close_window(r, 0, {6000, 4000, 4000, 4000});
    CHECK(planned(r));
  }
  SECTION("a large window under the threshold waits for the cadence") {
    deploy::rebalancer r(config(), initial_layout(), o);
    close_window(r, 0, {4300, 4000, 4000, 4000});  // 1.056x
    CHECK_FALSE(planned(r));
  }
  SECTION("with early re-planning off, even a large lopsided window waits") {
    o.early_replan_above = 0;
    deploy::rebalancer r(config(), initial_layout(), o);
    close_window(r, 0, {6000, 4000, 4000, 4000});
    CHECK_FALSE(planned(r));
  }
}

// Random re-plans (tests and fault injection): a whole reshuffle, or a planner-sized migration
// that moves about the asked fraction of the slots; both valid layouts.
#include "actors/rebalancer.hpp"

#include <catch2/catch.hpp>

using namespace brigade;

TEST_CASE("random re-plans are valid and move about the asked fraction", "[eplb]") {
  model::model_config c;
  c.num_layers = 4;
  c.num_experts = 32;
  c.hidden_size = 64;
  c.expert_intermediate = 32;
  auto initial = actors::expert_layout::initial(c, 4, 10);
  REQUIRE(initial.ok());
  actors::rebalancer r(c, initial.value(), {});
  const int slots = 4 * 4 * 10;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    const auto small = r.random_layout(seed, 0.2);
    REQUIRE(small.check().ok());
    CHECK(small.epoch == initial.value().epoch + 1);
    const int moved = r.moved_slots(small);
    CHECK(moved > 0);
    CHECK(moved <= slots / 4);
    const auto full = r.random_layout(seed);
    REQUIRE(full.check().ok());
    CHECK(r.moved_slots(full) > moved);
  }
}

TEST_CASE("a random re-plan moving no slots changes only the epoch", "[eplb]") {
  model::model_config c;
  c.num_layers = 4;
  c.num_experts = 32;
  c.hidden_size = 64;
  c.expert_intermediate = 32;
  auto initial = actors::expert_layout::initial(c, 4, 10);
  REQUIRE(initial.ok());
  actors::rebalancer r(c, initial.value(), {});
  const auto none = r.random_layout(7, 0.0);
  CHECK(none.epoch == initial.value().epoch + 1);
  CHECK(r.moved_slots(none) == 0);
  CHECK(none.phy2log == initial.value().phy2log);
  // The smallest fraction above zero still moves something: one swap per layer.
  CHECK(r.moved_slots(r.random_layout(7, 0.001)) > 0);
}

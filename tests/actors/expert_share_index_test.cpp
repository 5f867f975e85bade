#include "actors/expert_share_index.hpp"

#include <catch2/catch.hpp>
#include <memory>

using brigade::actors::expert_share_index;
using brigade::model::ffn_weights;

TEST_CASE("the share index finds weights while a shard holds them, and keeps none alive",
          "[eplb]") {
  expert_share_index index;
  CHECK(index.find(0, 3) == nullptr);
  auto held = std::make_shared<const ffn_weights>();
  index.publish(0, 3, held);
  CHECK(index.find(0, 3) == held);
  CHECK(index.find(0, 4) == nullptr);
  CHECK(index.find(1, 3) == nullptr);
  std::weak_ptr<const ffn_weights> watch = held;
  held.reset();
  CHECK(watch.expired());  // the index held no reference
  CHECK(index.find(0, 3) == nullptr);
}

TEST_CASE("the share index finds an expert while any of its copies lives", "[eplb]") {
  expert_share_index index;
  auto first = std::make_shared<const ffn_weights>();
  auto second = std::make_shared<const ffn_weights>();
  index.publish(2, 7, first);
  index.publish(2, 7, second);
  index.publish(2, 7, first);  // published again with every epoch: not a third copy
  CHECK(index.find(2, 7) == first);
  first.reset();
  CHECK(index.find(2, 7) == second);
  second.reset();
  CHECK(index.find(2, 7) == nullptr);
}

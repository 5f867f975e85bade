#include "eplb/layout.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "tests/eplb/layout_checks.hpp"

using namespace brigade::eplb;

namespace {

// 2 shards x 3 slots for 4 experts: expert 0 has two replicas, one per shard.
const layout_shape shape{1, 4, 2, 3};

std::string message_of(const std::vector<std::vector<int32_t>>& phy2log) {
  auto r = layout::from_phy2log(shape, phy2log, 0);
  REQUIRE_FALSE(r.ok());
  return r.err().message;
}

}  // namespace

TEST_CASE("layout derives log2phy and replica counts from phy2log", "[eplb][layout]") {
  auto l = layout::from_phy2log(shape, {{0, 1, 2, 3, 0, 1}}, 5);
  REQUIRE(l.ok());
  testing::require_layout_invariants(*l, "hand-made layout");
  CHECK(l->epoch() == 5);
  CHECK(l->replica_count(0, 0) == 2);
  CHECK(l->replica_count(0, 2) == 1);
  CHECK(std::vector<int32_t>(l->log2phy(0, 1).begin(), l->log2phy(0, 1).end()) ==
        std::vector<int32_t>{1, 5});
  CHECK(l->max_replicas() == 2);
  CHECK(l->shard_of(4) == 1);
}

TEST_CASE("layout rejects broken maps with a message naming the fault", "[eplb][layout]") {
  CHECK(message_of({{0, 1, 2, 3, 0}}).find("has 5 slots") != std::string::npos);
  CHECK(message_of({{0, 0, 2, 3, 1, 1}}).find("appears twice on shard 0") != std::string::npos);
  CHECK(message_of({{0, 1, 2, 0, 1, 2}}).find("expert 3 has no slot") != std::string::npos);
  CHECK(message_of({{0, 1, 2, 3, 4, 1}}).find("outside [0, 4)") != std::string::npos);
  CHECK(message_of({{0, 1, 2, 3, 0, 1}, {0, 1, 2, 3, 0, 1}}).find("2 layers") != std::string::npos);
  auto too_few = layout::from_phy2log(layout_shape{1, 9, 2, 3}, {{}}, 0);
  REQUIRE_FALSE(too_few.ok());
  CHECK(too_few.err().message.find("cannot hold 9 experts") != std::string::npos);
  auto too_wide = layout::from_phy2log(layout_shape{1, 2, 1, 3}, {{0, 1, 0}}, 0);
  REQUIRE_FALSE(too_wide.ok());
  CHECK(too_wide.err().message.find("exceed the 2 experts") != std::string::npos);
}

TEST_CASE("layout JSON round-trips and checks the shape it is read for", "[eplb][layout]") {
  auto l = layout::from_phy2log(shape, {{3, 1, 0, 2, 0, 1}}, 7);
  REQUIRE(l.ok());
  const std::string text = layout_to_json(*l);
  auto back = layout_from_json(text, shape);
  REQUIRE(back.ok());
  CHECK(back->phy2log() == l->phy2log());
  CHECK(back->epoch() == 7);

  // A bare phy2log is enough; the shape then comes from the caller.
  CHECK(layout_from_json(R"({"phy2log": [[3, 1, 0, 2, 0, 1]]})", shape).ok());

  auto fails_with = [](const std::string& json, const layout_shape& s, const std::string& part) {
    auto r = layout_from_json(json, s);
    REQUIRE_FALSE(r.ok());
    INFO(r.err().message);
    CHECK(r.err().message.find(part) != std::string::npos);
  };
  fails_with("{", shape, "not a JSON object");
  fails_with("{}", shape, "needs \"phy2log\"");
  fails_with(R"({"phy2log": [[3, 1, "x", 2, 0, 1]]})", shape, "not an expert id");
  fails_with(R"({"phy2log": [7]})", shape, "not an array");
  fails_with(text, layout_shape{1, 4, 3, 2}, "\"shards\" is 2 but the plan needs 3");
  fails_with(R"({"phy2log": [[3, 1, 0, 2, 0, 1]], "epoch": -1})", shape, "epoch");
}

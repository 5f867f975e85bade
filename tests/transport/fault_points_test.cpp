// Fault rules: parsing, matching and counting (their effect on traffic is in the node tests).
#include <catch2/catch.hpp>

#include "transport/fault_points.hpp"

using namespace brigade;
using namespace brigade::transport;

TEST_CASE("fault specs parse into rules", "[transport][faults]") {
  auto r = fault_points::parse("delay ms=50 from=1 to=2 channel=3 count=4");
  REQUIRE(r.ok());
  CHECK(r->kind == fault_kind::delay);
  CHECK(r->delay_ms == 50);
  CHECK(r->from == peer_id{1});
  CHECK(r->to == peer_id{2});
  CHECK(r->channel == channel_id{3});
  CHECK(r->count == 4);
  auto sever = fault_points::parse("sever from=1 to=2");
  REQUIRE(sever.ok());
  CHECK(sever->kind == fault_kind::sever);
  CHECK(!sever->channel);
}

TEST_CASE("bad fault specs are rejected with what to write instead", "[transport][faults]") {
  for (const char* spec : {"", "explode", "drop to", "drop to=x", "drop colour=red", "delay",
                           "delay ms=0", "drop count=0", "drop channel=70000"}) {
    INFO("spec '" << spec << "'");
    auto r = fault_points::parse(spec);
    REQUIRE(!r.ok());
    CHECK(r.err().code == errc::invalid_argument);
  }
}

TEST_CASE("faults cost nothing to check when none is set", "[transport][faults]") {
  fault_points::clear_all();
  CHECK(!fault_points::armed());
  {
    scoped_fault f("drop-everything", fault_rule{});
    CHECK(fault_points::armed());
  }
  CHECK(!fault_points::armed());
}

TEST_CASE("a counted fault applies to that many matching messages", "[transport][faults]") {
  fault_points::clear_all();
  fault_rule rule;
  rule.kind = fault_kind::drop;
  rule.to = 2;
  rule.channel = 5;
  rule.count = 2;
  fault_points::set("drop-two", rule);
  CHECK(!fault_points::on_send(1, 3, 5).drop);  // other receiver
  CHECK(!fault_points::on_send(1, 2, 6).drop);  // other channel
  CHECK(fault_points::on_send(1, 2, 5).drop);
  CHECK(fault_points::on_send(7, 2, 5).drop);
  CHECK(!fault_points::on_send(1, 2, 5).drop);
  CHECK(!fault_points::armed());
}

TEST_CASE("a severed link fails both directions until cleared", "[transport][faults]") {
  fault_points::clear_all();
  REQUIRE(fault_points::set("cut", "sever from=1 to=2").ok());
  CHECK(fault_points::on_send(1, 2, 0).severed);
  CHECK(fault_points::on_send(2, 1, 9).severed);
  CHECK(!fault_points::on_send(1, 3, 0).severed);
  CHECK(fault_points::severed(2, 1));
  fault_points::clear("cut");
  CHECK(!fault_points::severed(2, 1));
  CHECK(!fault_points::armed());
}

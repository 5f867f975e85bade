// Fault rules: parsing, matching and counting (their effect on traffic is in the node tests).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

TEST_CASE("a rate picks that share of messages, the same ones for the same seed",
          "[transport][faults]") {
  auto picked = [](uint64_t seed) {
    fault_points::clear_all();
    REQUIRE(fault_points::set("some", "drop rate=0.25 seed=" + std::to_string(seed)).ok());
    std::vector<bool> out;
    for (int i = 0; i < 4000; ++i)
      out.push_back(fault_points::on_send(1, 2, 5).drop);
    fault_points::clear_all();
    return out;
  };
  const auto a = picked(7), b = picked(7), c = picked(8);
  const auto share = std::count(a.begin(), a.end(), true) / 4000.0;
  CHECK(share > 0.2);
  CHECK(share < 0.3);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("a rule set for a while clears itself", "[transport][faults]") {
  fault_points::clear_all();
  REQUIRE(fault_points::set("brief", "sever from=1 to=2 for_ms=50").ok());
  CHECK(fault_points::severed(1, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  CHECK(!fault_points::severed(1, 2));
  CHECK(!fault_points::on_send(1, 2, 3).severed);
  CHECK(!fault_points::armed());
}

TEST_CASE("reorder holds some messages back between 1 and ms milliseconds", "[transport][faults]") {
  fault_points::clear_all();
  REQUIRE(fault_points::set("shuffle", "reorder ms=20 rate=0.5 seed=3").ok());
  int held = 0, passed = 0;
  for (int i = 0; i < 1000; ++i) {
    const fault_action a = fault_points::on_send(1, 2, 5);
    if (a.delay_ms == 0) {
      ++passed;
      continue;
    }
    ++held;
    CHECK(a.delay_ms >= 1);
    CHECK(a.delay_ms <= 20);
  }
  CHECK(held > 300);
  CHECK(passed > 300);
  fault_points::clear_all();
  for (const char* spec : {"reorder", "drop rate=0", "drop rate=1.5", "drop rate=x"}) {
    INFO("spec '" << spec << "'");
    CHECK(!fault_points::parse(spec).ok());
  }
}

// Each fault point's effect on real traffic between two transports in one process, and the
// bounded send queue.
#include <catch2/catch.hpp>

#include "tests/transport/test_inbox.hpp"
#include "transport/fault_points.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

namespace {

fault_rule rule(fault_kind kind, int count = -1) {
  fault_rule r;
  r.kind = kind;
  r.from = 1;
  r.to = 2;
  r.count = count;
  return r;
}

}  // namespace

TEST_CASE("drop: the message is never delivered and its sender sees success",
          "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  scoped_fault drop("drop-one", rule(fault_kind::drop, 1));
  CHECK(send_and_wait(*pair.a, 2, 1, "lost", byte_buffer::copy_of("a")).ok());
  CHECK(send_and_wait(*pair.a, 2, 1, "kept", byte_buffer::copy_of("b")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  // A later message fences the first: had "lost" been sent, it would have arrived before.
  const auto messages = pair.inbox_b.messages();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].header == "kept");
  CHECK(messages[0].sequence == 2);
  CHECK(pair.a->stats().faults_applied == 1);
}

TEST_CASE("duplicate: delivered twice without dedup and once with it", "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  const bool dedup = GENERATE(false, true);
  INFO("UCX_TLS=" << tls << " drop_duplicates=" << dedup);
  transport_pair pair(tls, dedup);
  {
    scoped_fault twice("twice", rule(fault_kind::duplicate, 1));
    REQUIRE(send_and_wait(*pair.a, 2, 1, "twice", byte_buffer::copy_of("x")).ok());
  }
  REQUIRE(send_and_wait(*pair.a, 2, 1, "fence", byte_buffer::copy_of("y")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(dedup ? 2 : 3));
  const auto messages = pair.inbox_b.messages();
  if (dedup) {
    REQUIRE(messages.size() == 2);
    CHECK(messages[0].header == "twice");
    CHECK(messages[1].header == "fence");
    CHECK(eventually([&] { return pair.b->stats().dropped_duplicates == 1; }));
  } else {
    REQUIRE(messages.size() == 3);
    CHECK(messages[0].header == "twice");
    CHECK(messages[1].header == "twice");
    CHECK(messages[0].sequence == messages[1].sequence);
    CHECK(messages[2].header == "fence");
  }
}

TEST_CASE("duplicate of a rendezvous payload is also caught by dedup", "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls, true);
  const byte_buffer payload = random_payload(1 << 20, 3);
  {
    scoped_fault twice("twice", rule(fault_kind::duplicate, 1));
    REQUIRE(send_and_wait(*pair.a, 2, 1, "big", payload).ok());
  }
  REQUIRE(send_and_wait(*pair.a, 2, 1, "fence", byte_buffer::copy_of("y")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(2));
  REQUIRE(eventually([&] { return pair.b->stats().dropped_duplicates == 1; }));
  const auto messages = pair.inbox_b.messages();
  REQUIRE(messages.size() == 2);
  CHECK(checksum(messages[0].payload.view()) == checksum(payload.view()));
}

TEST_CASE("delay: the message is held back and overtaken", "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  fault_rule slow = rule(fault_kind::delay, 1);
  slow.delay_ms = 300;
  fault_points::set("slow", slow);
  const auto start = std::chrono::steady_clock::now();
  send_future delayed;
  REQUIRE(pair.a->send(2, 1, "delayed", byte_buffer::copy_of("1"), delayed.handler()).ok());
  REQUIRE(pair.a->send(2, 1, "prompt", byte_buffer::copy_of("2")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(2));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const auto messages = pair.inbox_b.messages();
  CHECK(messages[0].header == "prompt");
  CHECK(messages[1].header == "delayed");
  // Not a speed check: the delay is a lower bound by construction.
  CHECK(elapsed >= std::chrono::milliseconds(300));
  REQUIRE(delayed.wait_for(wait_limit).has_value());
  fault_points::clear_all();
}

TEST_CASE("sever: sends fail both ways until the link heals", "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  {
    scoped_fault cut("cut", rule(fault_kind::sever));
    status ab = send_and_wait(*pair.a, 2, 1, "a->b", byte_buffer::copy_of("1"));
    status ba = send_and_wait(*pair.b, 1, 1, "b->a", byte_buffer::copy_of("2"));
    REQUIRE(!ab.ok());
    REQUIRE(!ba.ok());
    CHECK(ab.err().code == errc::unavailable);
    CHECK_THAT(ab.err().message, Catch::Contains("severed"));
    CHECK(ba.err().code == errc::unavailable);
  }
  CHECK(send_and_wait(*pair.a, 2, 1, "healed", byte_buffer::copy_of("3")).ok());
  CHECK(send_and_wait(*pair.b, 1, 1, "healed", byte_buffer::copy_of("4")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  REQUIRE(pair.inbox_a.wait_for_messages(1));
  CHECK(pair.inbox_b.messages().size() == 1);
  CHECK(pair.inbox_a.messages().size() == 1);
}

TEST_CASE("sever: a message already on its way is dropped on arrival", "[transport][faults]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  // Over TCP the first message also sets up the connection, which needs B's help.
  REQUIRE(send_and_wait(*pair.a, 2, 1, "warm up", byte_buffer::copy_of("0")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  {
    // B cannot look at its inbox while stalled; the link is cut before it can.
    stalled_progress hold(*pair.b);
    REQUIRE(send_and_wait(*pair.a, 2, 1, "in flight", byte_buffer::copy_of("1")).ok());
    fault_points::set("cut", rule(fault_kind::sever));
  }
  REQUIRE(eventually([&] { return pair.b->stats().faults_applied >= 1; }));
  fault_points::clear("cut");
  REQUIRE(send_and_wait(*pair.a, 2, 1, "after", byte_buffer::copy_of("2")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(2));
  const auto messages = pair.inbox_b.messages();
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].header == "warm up");
  CHECK(messages[1].header == "after");
}

TEST_CASE("a full send queue refuses the next send with an explicit error", "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_config small = test_config(1, tls);
  small.max_outstanding_sends = 4;
  transport_pair pair(tls, false, small, true);
  // Held sends stay outstanding until the delay passes.
  fault_rule hold = rule(fault_kind::delay);
  hold.delay_ms = 500;
  fault_points::set("hold", hold);
  std::vector<send_future> held(4);
  for (send_future& f : held) {
    REQUIRE(pair.a->send(2, 1, "held", byte_buffer::copy_of("x"), f.handler()).ok());
  }
  status refused = pair.a->send(2, 1, "one too many", byte_buffer::copy_of("y"));
  REQUIRE(!refused.ok());
  CHECK(refused.err().code == errc::resource_exhausted);
  CHECK_THAT(refused.err().message, Catch::Contains("max_outstanding_sends"));
  fault_points::clear("hold");
  for (send_future& f : held) {
    std::optional<status> outcome = f.wait_for(wait_limit);
    REQUIRE(outcome.has_value());
    CHECK(outcome->ok());
  }
  CHECK(send_and_wait(*pair.a, 2, 1, "room again", byte_buffer::copy_of("z")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(5));
}

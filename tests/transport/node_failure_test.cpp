// Peers going away and bad input: in-flight work fails fast with an error value, and bad
// addresses, headers or allocators are refused without harm.
#include <catch2/catch.hpp>

#include "tests/transport/test_inbox.hpp"
#include "transport/fault_points.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

void require_unavailable(const send_future& f, const std::string& mentioning) {
  std::optional<status> outcome = f.wait_for(wait_limit);
  REQUIRE(outcome.has_value());
  REQUIRE(!outcome->ok());
  CHECK(outcome->err().code == errc::unavailable);
  CHECK_THAT(outcome->err().message, Catch::Contains(mentioning));
}

}  // namespace

TEST_CASE("disconnect fails in-flight and delayed sends at once", "[transport][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  REQUIRE(send_and_wait(*pair.a, 2, 1, "warm up", byte_buffer::copy_of("x")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  // B stands still, so a rendezvous send to it cannot complete.
  stalled_progress hold(*pair.b);
  send_future large;
  REQUIRE(pair.a->send(2, 1, "large", random_payload(8 * mib, 1), large.handler()).ok());
  // Faults apply when the progress thread takes a send off its queue, so the rule stays set
  // until the peer is gone; it names its own channel to leave the large send alone.
  fault_rule slow;
  slow.kind = fault_kind::delay;
  slow.channel = 2;
  slow.delay_ms = 60000;
  scoped_fault held("held", slow);
  send_future delayed;
  REQUIRE(pair.a->send(2, 2, "delayed", byte_buffer::copy_of("d"), delayed.handler()).ok());
  CHECK(!large.ready());
  REQUIRE(pair.a->disconnect(2, "declared dead by the test").ok());
  // Should this ever fail, these say whether B saw the large message despite the stall.
  const transport_stats stalled = pair.b->stats();
  INFO("B delivered " << stalled.delivered_messages << ", started "
                      << stalled.rendezvous_receives_started << " rendezvous receives");
  require_unavailable(large, "declared dead by the test");
  require_unavailable(delayed, "declared dead by the test");
  send_future after;
  REQUIRE(pair.a->send(2, 1, "after", byte_buffer::copy_of("z"), after.handler()).ok());
  require_unavailable(after, "no endpoint");
  CHECK(pair.a->stats().failed_sends == 3);
}

TEST_CASE("disconnect fails a receive in flight from that peer", "[transport][failure]") {
  fault_points::clear_all();
  // Over TCP the rendezvous data needs the sender's help, so a stalled sender leaves the
  // receive hanging; over shared memory the receiver reads the data alone and finishes.
  transport_pair pair(tcp_tls);
  // B's allocator stalls A just before B starts receiving: from then on the receive waits.
  std::unique_ptr<stalled_progress> hold;
  inbox& large = pair.add_inbox();
  channel_options options = large.options();
  node_transport* a = pair.a.get();
  options.allocate = [&hold, a](peer_id, channel_id, std::size_t bytes) {
    hold = std::make_unique<stalled_progress>(*a);
    return result<byte_buffer>(byte_buffer::allocate(bytes));
  };
  REQUIRE(pair.b->open_channel(2, options).ok());
  REQUIRE(pair.a->send(2, 2, "large", random_payload(32 * mib, 2)).ok());
  REQUIRE(eventually([&] { return pair.b->stats().rendezvous_receives_started == 1; }));
  REQUIRE(pair.b->disconnect(1, "declared dead by the test").ok());
  REQUIRE(large.wait_for_failures(1));
  const auto failures = large.failures();
  CHECK(failures[0].from == 1);
  CHECK(failures[0].channel == 2);
  CHECK(failures[0].why.code == errc::unavailable);
  CHECK_THAT(failures[0].why.message, Catch::Contains("declared dead by the test"));
  CHECK(large.size() == 0);
  hold->release();
  // Whatever A still sends is dropped: B has written A off.
  REQUIRE(send_and_wait(*pair.a, 2, 1, "late", byte_buffer::copy_of("l")).ok());
  REQUIRE(eventually([&] { return pair.b->stats().dropped_unroutable >= 1; }));
  CHECK(pair.inbox_b.size() == 0);
  CHECK(large.size() == 0);
}

TEST_CASE("a peer connected again after disconnect is heard again", "[transport][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  REQUIRE(pair.b->disconnect(1, "test").ok());
  REQUIRE(pair.b->disconnect(1, "twice is harmless").ok());
  REQUIRE(pair.a->disconnect(2, "test").ok());
  const auto address_a = pair.a->local_address();
  const auto address_b = pair.b->local_address();
  REQUIRE(pair.a->connect(2, byte_view(address_b.data(), address_b.size())).ok());
  REQUIRE(pair.b->connect(1, byte_view(address_a.data(), address_a.size())).ok());
  REQUIRE(send_and_wait(*pair.a, 2, 1, "again", byte_buffer::copy_of("1")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  CHECK(pair.inbox_b.messages()[0].sequence == 1);
}

TEST_CASE("a link made again numbers on: a peer that kept its duplicate window still hears it",
          "[transport][failure]") {
  // One side drops the link (its coordinator declared the other lost) while the other never
  // noticed: it keeps the numbers it saw. Numbering again from 1, every message of the new link
  // read as a repeat there, and a healed partition stayed broken for good.
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls, true);
  REQUIRE(send_and_wait(*pair.a, 2, 1, "before", byte_buffer::copy_of("1")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  REQUIRE(pair.a->disconnect(2, "declared lost").ok());
  const auto address_b = pair.b->local_address();
  REQUIRE(pair.a->connect(2, byte_view(address_b.data(), address_b.size())).ok());
  REQUIRE(send_and_wait(*pair.a, 2, 1, "after", byte_buffer::copy_of("2")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(2));
  const auto messages = pair.inbox_b.messages();
  CHECK(messages[1].header == "after");
  CHECK(messages[1].sequence == 2);
  CHECK(pair.b->stats().dropped_duplicates == 0);
}

TEST_CASE("a handler that disconnects a peer gives every send back exactly once",
          "[transport][failure]") {
  // A failed send's handler may drop a link (the data plane does), which runs the completion
  // pass again from inside a handler. The inner pass used to take the outer pass's batch, which
  // then ran again: those sends were given back twice, the count of outstanding sends wrapped
  // below zero, and every later send was refused as "already outstanding". A node that came
  // back after being declared lost stayed wedged so.
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_config small = test_config(1, tls);
  small.max_outstanding_sends = 8;
  transport_pair pair(tls, false, small, true);
  REQUIRE(send_and_wait(*pair.a, 2, 1, "warm up", byte_buffer::copy_of("x")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
  std::vector<send_future> large(5);
  send_future dropped;
  {
    // B stands still, so the rendezvous sends stay in flight until A drops the link.
    stalled_progress hold(*pair.b);
    for (size_t i = 0; i < large.size(); ++i) {
      REQUIRE(pair.a
                  ->send(2, 1, "large", random_payload(8 * mib, static_cast<int>(i)),
                         large[i].handler())
                  .ok());
    }
    // A send to a peer A never connected fails; its handler drops the link to B.
    node_transport* a = pair.a.get();
    auto handler = dropped.handler();
    REQUIRE(pair.a
                ->send(3, 1, "nowhere", byte_buffer::copy_of("n"),
                       [a, handler](const status& outcome) {
                         (void)a->disconnect(2, "dropped by a handler");
                         handler(outcome);
                       })
                .ok());
    require_unavailable(dropped, "no endpoint");
    for (auto& f : large)
      require_unavailable(f, "dropped by a handler");
  }
  const auto address_b = pair.b->local_address();
  REQUIRE(pair.a->connect(2, byte_view(address_b.data(), address_b.size())).ok());
  // Every send was given back: new ones are admitted again.
  for (int i = 0; i < 8; ++i) {
    INFO("send " << i);
    REQUIRE(send_and_wait(*pair.a, 2, 1, "after", byte_buffer::copy_of("y")).ok());
  }
}

TEST_CASE("bad addresses are refused with a clear error", "[transport][failure]") {
  fault_points::clear_all();
  transport_pair pair(tcp_tls);
  status garbage = pair.a->connect(3, "definitely not a worker address, but long enough");
  REQUIRE(!garbage.ok());
  CHECK(garbage.err().code == errc::bad_format);
  const auto address_b = pair.b->local_address();
  status wrong_node = pair.a->connect(3, byte_view(address_b.data(), address_b.size()));
  REQUIRE(!wrong_node.ok());
  CHECK(wrong_node.err().code == errc::invalid_argument);
  CHECK_THAT(wrong_node.err().message, Catch::Contains("node 2"));
  status twice = pair.a->connect(2, byte_view(address_b.data(), address_b.size()));
  REQUIRE(!twice.ok());
  CHECK_THAT(twice.err().message, Catch::Contains("already connected"));

  auto shm = node_transport::start(test_config(3, shm_tls));
  REQUIRE(shm.ok());
  const auto address_shm = (*shm)->local_address();
  status mismatch = pair.a->connect(3, byte_view(address_shm.data(), address_shm.size()));
  REQUIRE(!mismatch.ok());
  CHECK(mismatch.err().code == errc::invalid_argument);
  CHECK_THAT(mismatch.err().message, Catch::Contains("same transports"));
  // The transport is unharmed.
  CHECK(send_and_wait(*pair.a, 2, 1, "still fine", byte_buffer::copy_of("1")).ok());
}

TEST_CASE("bad sends are refused or fail without harm", "[transport][failure]") {
  fault_points::clear_all();
  transport_pair pair(shm_tls);
  const std::string huge_header(2000, 'h');
  status too_big = pair.a->send(2, 1, huge_header, byte_buffer());
  REQUIRE(!too_big.ok());
  CHECK(too_big.err().code == errc::invalid_argument);
  send_future unknown;
  REQUIRE(pair.a->send(99, 1, "who", byte_buffer(), unknown.handler()).ok());
  require_unavailable(unknown, "connect() it first");
  // A channel B never opened: dropped and counted, nothing else changes.
  REQUIRE(send_and_wait(*pair.a, 2, 77, "nobody", byte_buffer::copy_of("1")).ok());
  REQUIRE(eventually([&] { return pair.b->stats().dropped_unroutable == 1; }));
  CHECK(send_and_wait(*pair.a, 2, 1, "still fine", byte_buffer::copy_of("1")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
}

TEST_CASE("a receiver's allocator can refuse a payload", "[transport][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  const std::size_t bytes = GENERATE(std::size_t{16}, 4 * mib);
  INFO("UCX_TLS=" << tls << " payload " << bytes);
  transport_pair pair(tls);
  inbox& refusing = pair.add_inbox();
  channel_options options = refusing.options();
  options.allocate = [](peer_id, channel_id, std::size_t) -> result<byte_buffer> {
    return error(errc::resource_exhausted, "test pool is empty");
  };
  REQUIRE(pair.b->open_channel(2, options).ok());
  REQUIRE(send_and_wait(*pair.a, 2, 2, "refused", random_payload(bytes, 1)).ok());
  REQUIRE(refusing.wait_for_failures(1));
  CHECK(refusing.failures()[0].why.code == errc::resource_exhausted);
  CHECK(refusing.size() == 0);
  CHECK(send_and_wait(*pair.a, 2, 1, "still fine", byte_buffer::copy_of("1")).ok());
  REQUIRE(pair.inbox_b.wait_for_messages(1));
}

TEST_CASE("shutdown with sends pending completes every one of them", "[transport][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_config quick = test_config(1, tls);
  quick.close_timeout_ms = 200;
  transport_pair pair(tls, false, quick, true);
  std::vector<send_future> pending(3);
  {
    stalled_progress hold(*pair.b);
    for (send_future& f : pending) {
      REQUIRE(pair.a->send(2, 1, "pending", random_payload(4 * mib, 1), f.handler()).ok());
    }
    pair.a.reset();
  }
  for (send_future& f : pending)
    REQUIRE(f.wait_for(std::chrono::milliseconds(0)).has_value());
}

// Two transports in one process: delivery in order, large payloads by rendezvous into the
// receiver's own buffers, many senders at once.
#include <catch2/catch.hpp>
#include <thread>

#include "tests/transport/test_inbox.hpp"
#include "transport/fault_points.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

}  // namespace

TEST_CASE("small messages arrive in order in both directions", "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  constexpr int count = 1000;
  for (int i = 0; i < count; ++i) {
    const std::string text = std::to_string(i);
    REQUIRE(pair.a->send(2, 1, "h" + text, byte_buffer::copy_of(text)).ok());
    REQUIRE(pair.b->send(1, 1, "h" + text, byte_buffer::copy_of(text)).ok());
  }
  REQUIRE(pair.inbox_b.wait_for_messages(count));
  REQUIRE(pair.inbox_a.wait_for_messages(count));
  for (inbox* box : {&pair.inbox_a, &pair.inbox_b}) {
    const auto messages = box->messages();
    REQUIRE(messages.size() == count);
    for (int i = 0; i < count; ++i) {
      const std::string text = std::to_string(i);
      CHECK(messages[i].sequence == static_cast<std::uint64_t>(i + 1));
      CHECK(messages[i].header == "h" + text);
      CHECK(std::string(messages[i].payload.view().as_chars()) == text);
    }
  }
  CHECK(pair.inbox_b.messages().front().from == 1);
  CHECK(pair.inbox_a.messages().front().from == 2);
}

TEST_CASE("a 64 MiB payload arrives intact by rendezvous into the receiver's buffer",
          "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  const std::uint64_t seed = Catch::rngSeed();
  INFO("UCX_TLS=" << tls << " seed " << seed);
  transport_pair pair(tls);
  // Channel 2 lands payloads in buffers this test hands out, to prove where the bytes go.
  inbox& large = pair.add_inbox();
  std::mutex handed_out_mutex;
  std::vector<const std::byte*> handed_out;
  channel_options options = large.options();
  options.allocate = [&](peer_id from, channel_id channel, std::size_t bytes) {
    CHECK(from == 1);
    CHECK(channel == 2);
    byte_buffer b = byte_buffer::allocate(bytes);
    std::lock_guard<std::mutex> lock(handed_out_mutex);
    handed_out.push_back(b.data());
    return result<byte_buffer>(b);
  };
  REQUIRE(pair.b->open_channel(2, options).ok());

  const byte_buffer payload = random_payload(64 * mib, seed);
  const std::uint64_t expected = checksum(payload.view());
  for (int round = 0; round < 2; ++round) {
    status sent = send_and_wait(*pair.a, 2, 2, "big", payload);
    INFO((sent ? std::string() : sent.err().describe()));
    REQUIRE(sent.ok());
  }
  REQUIRE(large.wait_for_messages(2));
  const auto messages = large.messages();
  std::lock_guard<std::mutex> lock(handed_out_mutex);
  REQUIRE(handed_out.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(messages[i].header == "big");
    REQUIRE(messages[i].payload.size() == 64 * mib);
    CHECK(messages[i].payload.data() == handed_out[i]);
    CHECK(checksum(messages[i].payload.view()) == expected);
  }
  // The second send of the same buffer reuses its registration.
  const transport_stats stats = pair.a->stats();
  CHECK(stats.registration_misses == 1);
  CHECK(stats.registration_hits >= 1);
}

TEST_CASE("payloads of every size class arrive intact", "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  const std::uint64_t seed = Catch::rngSeed();
  INFO("UCX_TLS=" << tls << " seed " << seed);
  transport_pair pair(tls);
  const std::vector<std::size_t> sizes = {
      0, 1, 63, 64, 65, 511, 512, 8191, 8192, 65535, 64 * 1024, 64 * 1024 + 1, 300000, 2 * mib + 3};
  std::vector<std::uint64_t> sums;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const byte_buffer payload = random_payload(sizes[i], seed + i);
    sums.push_back(checksum(payload.view()));
    REQUIRE(pair.a->send(2, 1, std::to_string(i), payload).ok());
  }
  REQUIRE(pair.inbox_b.wait_for_messages(sizes.size()));
  for (const recorded_message& m : pair.inbox_b.messages()) {
    const std::size_t i = std::stoul(m.header);
    INFO("payload of " << sizes[i] << " bytes");
    CHECK(m.payload.size() == sizes[i]);
    CHECK(checksum(m.payload.view()) == sums[i]);
  }
}

TEST_CASE("many threads sending at once lose nothing and keep each thread's order", "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  constexpr int threads = 4;
  constexpr int per_thread = 500;
  constexpr int large_messages = 16;
  std::atomic<int> failures{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string text = std::to_string(t) + ":" + std::to_string(i);
        status s = pair.a->send(2, 1, text, byte_buffer::copy_of(text));
        // A full queue is a legal answer under load; wait and retry.
        while (!s && s.err().code == errc::resource_exhausted) {
          std::this_thread::yield();
          s = pair.a->send(2, 1, text, byte_buffer::copy_of(text));
        }
        if (!s) failures.fetch_add(1);
      }
    });
  }
  const byte_buffer big = random_payload(mib, 7);
  std::vector<send_future> large_done(large_messages);
  for (int i = 0; i < large_messages; ++i) {
    REQUIRE(pair.a->send(2, 1, "large", big, large_done[i].handler()).ok());
  }
  for (std::thread& t : senders)
    t.join();
  CHECK(failures.load() == 0);
  for (send_future& f : large_done) {
    std::optional<status> outcome = f.wait_for(wait_limit);
    REQUIRE(outcome.has_value());
    CHECK(outcome->ok());
  }
  REQUIRE(pair.inbox_b.wait_for_messages(threads * per_thread + large_messages));
  std::vector<int> next(threads, 0);
  int large_seen = 0;
  for (const recorded_message& m : pair.inbox_b.messages()) {
    if (m.header == "large") {
      ++large_seen;
      CHECK(m.payload.size() == mib);
      continue;
    }
    const int t = std::stoi(m.header.substr(0, m.header.find(':')));
    const int i = std::stoi(m.header.substr(m.header.find(':') + 1));
    CHECK(i == next[t]);
    next[t] = i + 1;
  }
  CHECK(large_seen == large_messages);
  for (int t = 0; t < threads; ++t)
    CHECK(next[t] == per_thread);
}

TEST_CASE("handlers may send from the progress thread (echo)", "[transport]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  channel_options echo;
  node_transport* b = pair.b.get();
  echo.on_message = [b](received_message& m) {
    CHECK(b->on_progress_thread());
    b->send(m.from, 1, m.header, std::move(m.payload));
  };
  REQUIRE(pair.b->open_channel(3, echo).ok());
  for (int i = 0; i < 100; ++i) {
    REQUIRE(pair.a->send(2, 3, std::to_string(i), byte_buffer::copy_of("ping")).ok());
  }
  REQUIRE(pair.inbox_a.wait_for_messages(100));
  const auto messages = pair.inbox_a.messages();
  for (int i = 0; i < 100; ++i) {
    CHECK(messages[i].header == std::to_string(i));
    CHECK(std::string(messages[i].payload.view().as_chars()) == "ping");
  }
}

// A transport in this process and one in a child process (transport_test_peer); the test plays
// the control plane, passing worker addresses over the child's pipes and declaring it dead.
#include <signal.h>

#include <catch2/catch.hpp>

#include "common/hex.hpp"
#include "common/subprocess.hpp"
#include "tests/transport/test_inbox.hpp"
#include "transport/fault_points.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr peer_id local_node = 1;
constexpr peer_id child_node = 2;

/// This process's transport, the child's, and the pipe between them.
class two_processes {
 public:
  explicit two_processes(const std::string& tls) {
    auto started = node_transport::start(test_config(local_node, tls));
    REQUIRE(started.ok());
    local = std::move(*started);
    REQUIRE(local->open_channel(1, echoes.options()).ok());
    REQUIRE(local->open_channel(3, sums.options()).ok());
    REQUIRE(local->open_channel(4, pushed.options()).ok());
    local->on_peer_failure([this](peer_id peer, const error& why) {
      std::lock_guard<std::mutex> lock(mutex);
      failed_peers.emplace_back(peer, why);
    });
    subprocess::options opts;
    opts.argv = {TRANSPORT_TEST_PEER, std::to_string(child_node), tls};
    auto spawned = subprocess::spawn(opts);
    REQUIRE(spawned.ok());
    child = std::move(*spawned);
    const std::string line = read();
    REQUIRE(line.rfind("ADDR ", 0) == 0);
    const auto address = from_hex(line.substr(5));
    REQUIRE(address.has_value());
    status connected = local->connect(child_node, byte_view(address->data(), address->size()));
    INFO((connected ? std::string() : connected.err().describe()));
    REQUIRE(connected.ok());
    REQUIRE(command("CONNECT 1 " + to_hex(local->local_address())) == "OK");
  }
  ~two_processes() { local.reset(); }

  /// The child's next answer. UCX logs ("[time] [host:pid] ...") to the same stdout; skip them.
  std::string read() {
    while (true) {
      result<std::string> line = child->read_line(wait_limit);
      INFO((line ? std::string() : line.err().describe()));
      REQUIRE(line.ok());
      if (line->empty() || (*line)[0] != '[') return *line;
    }
  }
  std::string command(const std::string& line) {
    REQUIRE(child->write_line(line).ok());
    return read();
  }
  void kill_child() {
    REQUIRE(child->kill(SIGKILL).ok());
    result<int> code = child->wait(wait_limit);
    REQUIRE(code.ok());
    CHECK(*code == 128 + SIGKILL);
  }
  std::size_t peer_failures() {
    std::lock_guard<std::mutex> lock(mutex);
    return failed_peers.size();
  }

  inbox echoes;
  inbox sums;
  inbox pushed;
  std::mutex mutex;
  std::vector<std::pair<peer_id, error>> failed_peers;
  std::unique_ptr<node_transport> local;
  std::optional<subprocess> child;
};

}  // namespace

TEST_CASE("two processes: small messages in order and 64 MiB intact both ways",
          "[transport][process]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  const std::uint64_t seed = Catch::rngSeed();
  INFO("UCX_TLS=" << tls << " seed " << seed);
  two_processes p(tls);
  constexpr int count = 1000;
  for (int i = 0; i < count; ++i) {
    const std::string text = std::to_string(i);
    REQUIRE(p.local->send(child_node, 1, text, byte_buffer::copy_of(text)).ok());
  }
  REQUIRE(p.echoes.wait_for_messages(count));
  const auto echoed = p.echoes.messages();
  for (int i = 0; i < count; ++i) {
    CHECK(echoed[i].header == std::to_string(i));
    CHECK(echoed[i].from == child_node);
  }

  const byte_buffer large = random_payload(64 * mib, seed);
  REQUIRE(send_and_wait(*p.local, child_node, 2, "large", large).ok());
  REQUIRE(p.sums.wait_for_messages(1));
  CHECK(p.sums.messages()[0].header ==
        std::to_string(checksum(large.view())) + ":" + std::to_string(64 * mib));

  const std::uint64_t child_seed = seed + 1;
  CHECK(p.command("SEND 1 4 " + std::to_string(64 * mib) + " " + std::to_string(child_seed)) ==
        "SENT ok");
  REQUIRE(p.pushed.wait_for_messages(1));
  const recorded_message pushed = p.pushed.messages()[0];
  CHECK(pushed.header == "seed:" + std::to_string(child_seed));
  CHECK(checksum(pushed.payload.view()) == checksum(random_payload(64 * mib, child_seed).view()));
  REQUIRE(p.child->write_line("QUIT").ok());
  result<int> code = p.child->wait(wait_limit);
  REQUIRE(code.ok());
  CHECK(*code == 0);
}

TEST_CASE("two processes: a peer killed with -9 fails in-flight sends fast",
          "[transport][process][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  two_processes p(tls);
  REQUIRE(send_and_wait(*p.local, child_node, 1, "warm up", byte_buffer::copy_of("x")).ok());
  // The child stands still, so rendezvous sends to it stay in flight until it dies.
  REQUIRE(p.command("STALL") == "STALLED");
  std::vector<send_future> in_flight(3);
  for (send_future& f : in_flight) {
    REQUIRE(p.local->send(child_node, 2, "large", random_payload(16 * mib, 1), f.handler()).ok());
  }
  for (send_future& f : in_flight)
    CHECK(!f.ready());
  p.kill_child();
  if (p.local->errors() == error_mode::none) {
    // Shared memory has no peer-failure detection in UCX 1.13: the control plane (here, the
    // test that saw the child exit) declares the peer dead.
    REQUIRE(p.local->disconnect(child_node, "process exited").ok());
  }
  for (send_future& f : in_flight) {
    std::optional<status> outcome = f.wait_for(wait_limit);
    REQUIRE(outcome.has_value());
    REQUIRE(!outcome->ok());
    CHECK(outcome->err().code == errc::unavailable);
  }
  if (p.local->errors() == error_mode::peer) {
    REQUIRE(eventually([&] { return p.peer_failures() == 1; }));
    CHECK(p.failed_peers[0].first == child_node);
  }
  send_future after;
  REQUIRE(p.local->send(child_node, 1, "after", byte_buffer::copy_of("x"), after.handler()).ok());
  std::optional<status> outcome = after.wait_for(wait_limit);
  REQUIRE(outcome.has_value());
  CHECK(!outcome->ok());
}

TEST_CASE("two processes: a peer killed during a stream of 64 MiB sends",
          "[transport][process][failure]") {
  fault_points::clear_all();
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  two_processes p(tls);
  const byte_buffer large = random_payload(64 * mib, 5);
  constexpr int count = 6;
  std::vector<send_future> sends(count);
  for (send_future& f : sends) {
    REQUIRE(p.local->send(child_node, 2, "large", large, f.handler()).ok());
  }
  // Kill the child once the first transfer has landed, while the rest are still on their way.
  REQUIRE(p.sums.wait_for_messages(1));
  p.kill_child();
  if (p.local->errors() == error_mode::none) {
    REQUIRE(p.local->disconnect(child_node, "process exited").ok());
  }
  int failed = 0;
  for (send_future& f : sends) {
    std::optional<status> outcome = f.wait_for(wait_limit);
    REQUIRE(outcome.has_value());
    if (!outcome->ok()) {
      CHECK(outcome->err().code == errc::unavailable);
      ++failed;
    }
  }
  // Each send either finished before the kill or failed; none hangs, and the last ones fail.
  CHECK(failed >= 1);
  CHECK(!sends.back().wait_for(std::chrono::milliseconds(0))->ok());
}

#include "chaos/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using brigade::errc;
using brigade::chaos::proxy_mode;
using brigade::chaos::proxy_options;
using brigade::chaos::tcp_proxy;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// How long a test waits for something that should happen: only a hang or a bug takes this long.
constexpr milliseconds patience = 5000ms;
/// How long a bulk transfer may take before the test gives up (slow under valgrind).
constexpr milliseconds bulk_patience = 60000ms;
/// How long a test watches for something that must not happen.
constexpr milliseconds quiet_period = 250ms;

/// A socket the test owns, closed when it goes out of scope.
class test_socket {
 public:
  explicit test_socket(int fd = -1) : fd_(fd) {}
  ~test_socket() { close(); }
  test_socket(test_socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  test_socket& operator=(test_socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

/// A socket bound to 127.0.0.1 on a free port: listening, or only holding the port (so that
/// connecting to it is refused).
test_socket bound_socket(bool listening) {
  test_socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.valid());
  const sockaddr_in address = loopback(0);
  REQUIRE(::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  if (listening) REQUIRE(::listen(s.fd(), 16) == 0);
  return s;
}

uint16_t bound_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  return ntohs(address.sin_port);
}

/// A listener on 127.0.0.1 whose connections the test reads and writes itself.
class test_listener {
 public:
  test_listener() : socket_(bound_socket(true)), port_(bound_port(socket_.fd())) {}
  uint16_t port() const { return port_; }

  /// The next connection to arrive within `timeout` (non-blocking), or an invalid socket.
  test_socket accept_within(milliseconds timeout) {
    pollfd p{socket_.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return test_socket();
    return test_socket(::accept4(socket_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  }

 private:
  test_socket socket_;
  uint16_t port_;
};

/// A connected, non-blocking client socket.
test_socket connect_to(uint16_t port) {
  test_socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.valid());
  const sockaddr_in address = loopback(port);
  REQUIRE(::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL) | O_NONBLOCK) == 0);
  return s;
}

int remaining_ms(steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
  return static_cast<int>(std::max<milliseconds::rep>(0, left.count()));
}

/// Sends `size` bytes unless time runs out or the connection fails; returns how many it sent.
size_t send_within(int fd, const char* data, size_t size, milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  size_t sent = 0;
  while (sent < size) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return sent;
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return sent;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

size_t send_within(int fd, const std::string& data, milliseconds timeout) {
  return send_within(fd, data.data(), data.size(), timeout);
}

/// Reads until `size` bytes came, the connection ended or time ran out; returns what came.
std::string receive_within(int fd, size_t size, milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  std::string got;
  std::vector<char> buffer(64 * 1024);
  while (got.size() < size) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return got;
    const ssize_t n = ::recv(fd, buffer.data(), std::min(buffer.size(), size - got.size()), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return got;
    got.append(buffer.data(), static_cast<size_t>(n));
  }
  return got;
}

/// True when nothing at all (no byte, no close) arrives on `fd` for `period`.
bool quiet_for(int fd, milliseconds period) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(period.count())) == 0;
}

/// True when the peer closes the connection (FIN or reset) within `timeout`; bytes that arrive
/// first are read and dropped.
bool closed_within(int fd, milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  char buffer[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return true;
  }
}

bool wait_until(const std::function<bool()>& done, milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (!done()) {
    if (steady::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// Bytes from a fixed xorshift sequence: a reordered, lost or repeated run shows as a mismatch.
std::string pattern(size_t size, uint32_t seed) {
  std::string out(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x & 0xff);
  }
  return out;
}

/// Where `got` first differs from `want` (a length difference counts); npos when equal.
size_t first_difference(const std::string& got, const std::string& want) {
  const size_t common = std::min(got.size(), want.size());
  for (size_t i = 0; i < common; ++i) {
    if (got[i] != want[i]) return i;
  }
  return got.size() == want.size() ? std::string::npos : common;
}

/// Echoes every connection's bytes back until the peer closes, one connection at a time.
class echo_server {
 public:
  echo_server() : thread_([this] { run(); }) {}
  ~echo_server() {
    stopping_.store(true);
    thread_.join();
  }
  uint16_t port() const { return listener_.port(); }

 private:
  void run() {
    while (!stopping_.load()) {
      test_socket connection = listener_.accept_within(50ms);
      if (connection.valid()) echo(connection.fd());
    }
  }
  void echo(int fd) {
    std::vector<char> buffer(64 * 1024);
    while (!stopping_.load()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return;
      size_t sent = 0;
      while (sent < static_cast<size_t>(n) && !stopping_.load()) {
        sent += send_within(fd, buffer.data() + sent, static_cast<size_t>(n) - sent, 50ms);
      }
    }
  }

  test_listener listener_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

proxy_options options_for(uint16_t target_port) {
  proxy_options options;
  options.target_port = target_port;
  return options;
}

std::unique_ptr<tcp_proxy> start_proxy(const proxy_options& options) {
  auto proxy = tcp_proxy::start(options);
  if (!proxy) FAIL(proxy.err().describe());
  return std::move(proxy).value();
}

/// A client connected through the proxy, and the target's end of the same connection.
struct proxied_pair {
  test_socket client;
  test_socket upstream;
};

proxied_pair connect_through(const tcp_proxy& proxy, test_listener& target) {
  proxied_pair pair{connect_to(proxy.port()), test_socket()};
  pair.upstream = target.accept_within(patience);
  REQUIRE(pair.upstream.valid());
  return pair;
}

}  // namespace

TEST_CASE("8 MiB pass through the proxy to an echo server and back, in order", "[chaos]") {
  echo_server echo;
  auto proxy = start_proxy(options_for(echo.port()));
  test_socket client = connect_to(proxy->port());
  const std::string sent = pattern(8 << 20, 1);
  size_t sent_bytes = 0;
  std::thread sender([&] { sent_bytes = send_within(client.fd(), sent, bulk_patience); });
  const std::string back = receive_within(client.fd(), sent.size(), bulk_patience);
  sender.join();
  CHECK(sent_bytes == sent.size());
  CHECK(first_difference(back, sent) == std::string::npos);
  CHECK(wait_until([&] { return proxy->stats().bytes_to_client == sent.size(); }, patience));
  const auto stats = proxy->stats();
  CHECK(stats.bytes_to_target == sent.size());
  CHECK(stats.connections_accepted == 1);
  CHECK(stats.connections_open == 1);
  CHECK(stats.bytes_held == 0);
}

TEST_CASE("a client that stops reading makes the proxy stop reading: what it holds stays bounded",
          "[chaos]") {
  echo_server echo;
  proxy_options options = options_for(echo.port());
  options.forward_buffer_bytes = 256 * 1024;
  auto proxy = start_proxy(options);
  test_socket client = connect_to(proxy->port());
  // The client sends a repeating block and reads nothing until the chain of buffers is full.
  const std::string block = pattern(1 << 20, 2);
  const size_t most_bytes = size_t{256} << 20;
  size_t sent_bytes = 0;
  while (sent_bytes < most_bytes) {
    const size_t offset = sent_bytes % block.size();
    const size_t n =
        send_within(client.fd(), block.data() + offset, block.size() - offset, quiet_period);
    sent_bytes += n;
    if (n < block.size() - offset) break;
  }
  CHECK(sent_bytes < most_bytes);
  // Each direction buffers at most its bound plus one read.
  CHECK(proxy->stats().bytes_held <= 4 * options.forward_buffer_bytes);
  const std::string back = receive_within(client.fd(), sent_bytes, bulk_patience);
  REQUIRE(back.size() == sent_bytes);
  size_t mismatches = 0;
  for (size_t i = 0; i < back.size(); ++i)
    mismatches += back[i] != block[i % block.size()];
  CHECK(mismatches == 0);
}

TEST_CASE(
    "during a partition nothing arrives on either side, and after healing all of it does, "
    "in order",
    "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::partition);
  CHECK(proxy->mode() == proxy_mode::partition);
  const std::string up = pattern(300 * 1024, 3);
  const std::string down = "pong from the target";
  for (size_t offset = 0; offset < up.size(); offset += 100 * 1024) {
    CHECK(send_within(pair.client.fd(), up.data() + offset, 100 * 1024, patience) == 100 * 1024);
  }
  CHECK(send_within(pair.upstream.fd(), down, patience) == down.size());
  CHECK(quiet_for(pair.upstream.fd(), quiet_period));
  CHECK(quiet_for(pair.client.fd(), quiet_period));
  CHECK(wait_until([&] { return proxy->stats().bytes_held == up.size() + down.size(); }, patience));
  proxy->set_mode(proxy_mode::pass);
  const std::string got_up = receive_within(pair.upstream.fd(), up.size(), patience);
  CHECK(first_difference(got_up, up) == std::string::npos);
  CHECK(receive_within(pair.client.fd(), down.size(), patience) == down);
}

TEST_CASE(
    "a client that closes during a partition: the target sees its last bytes and the close "
    "only after healing",
    "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::partition);
  const std::string last_words = "last words";
  CHECK(send_within(pair.client.fd(), last_words, patience) == last_words.size());
  pair.client.close();
  CHECK(quiet_for(pair.upstream.fd(), quiet_period));
  proxy->set_mode(proxy_mode::pass);
  CHECK(receive_within(pair.upstream.fd(), last_words.size(), patience) == last_words);
  CHECK(closed_within(pair.upstream.fd(), patience));
  // Half closed, the connection lives on until the target closes its side too.
  CHECK(proxy->stats().connections_open == 1);
  pair.upstream.close();
  CHECK(wait_until([&] { return proxy->stats().connections_open == 0; }, patience));
}

TEST_CASE("a target that closes during a partition: the client learns it only after healing",
          "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::partition);
  pair.upstream.close();
  CHECK(quiet_for(pair.client.fd(), quiet_period));
  proxy->set_mode(proxy_mode::pass);
  CHECK(closed_within(pair.client.fd(), patience));
}

TEST_CASE("a connection accepted during a partition reaches the target only after healing",
          "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxy->set_mode(proxy_mode::partition);
  test_socket client = connect_to(proxy->port());
  const std::string early = "sent before the target was dialled";
  CHECK(send_within(client.fd(), early, patience) == early.size());
  CHECK_FALSE(target.accept_within(quiet_period).valid());
  CHECK(proxy->stats().connections_accepted == 1);
  proxy->set_mode(proxy_mode::pass);
  test_socket upstream = target.accept_within(patience);
  REQUIRE(upstream.valid());
  CHECK(receive_within(upstream.fd(), early.size(), patience) == early);
}

TEST_CASE("a one-way partition holds what the client sends and forwards what the target sends",
          "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::partition_client_to_target);
  CHECK(send_within(pair.client.fd(), std::string("up"), patience) == 2);
  CHECK(send_within(pair.upstream.fd(), std::string("down"), patience) == 4);
  CHECK(receive_within(pair.client.fd(), 4, patience) == "down");
  CHECK(quiet_for(pair.upstream.fd(), quiet_period));
  proxy->set_mode(proxy_mode::pass);
  CHECK(receive_within(pair.upstream.fd(), 2, patience) == "up");
}

TEST_CASE("reset closes open connections on both sides and closes new ones until pass", "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::reset);
  CHECK(closed_within(pair.client.fd(), patience));
  CHECK(closed_within(pair.upstream.fd(), patience));

  test_socket refused = connect_to(proxy->port());
  CHECK(closed_within(refused.fd(), patience));
  CHECK_FALSE(target.accept_within(quiet_period).valid());
  const auto stats = proxy->stats();
  CHECK(stats.connections_reset_by_mode == 2);
  CHECK(stats.connections_open == 0);

  proxy->set_mode(proxy_mode::pass);
  proxied_pair again = connect_through(*proxy, target);
  CHECK(send_within(again.client.fd(), std::string("back"), patience) == 4);
  CHECK(receive_within(again.upstream.fd(), 4, patience) == "back");
}

TEST_CASE("with delay_ms set, bytes arrive no earlier than the delay after they were sent",
          "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  proxied_pair pair = connect_through(*proxy, target);
  const milliseconds delay = 300ms;
  proxy->set_delay_ms(static_cast<uint32_t>(delay.count()));
  CHECK(proxy->delay_ms() == static_cast<uint32_t>(delay.count()));

  auto sent_at = steady::now();
  CHECK(send_within(pair.client.fd(), std::string("slow"), patience) == 4);
  CHECK(receive_within(pair.upstream.fd(), 4, patience) == "slow");
  CHECK(steady::now() - sent_at >= delay);

  sent_at = steady::now();
  CHECK(send_within(pair.upstream.fd(), std::string("reply"), patience) == 5);
  CHECK(receive_within(pair.client.fd(), 5, patience) == "reply");
  CHECK(steady::now() - sent_at >= delay);

  sent_at = steady::now();
  pair.client.close();
  CHECK(closed_within(pair.upstream.fd(), patience));
  CHECK(steady::now() - sent_at >= delay);
}

TEST_CASE(
    "a connection that must hold more than the hold bound during a partition is reset and "
    "counted",
    "[chaos]") {
  test_listener target;
  proxy_options options = options_for(target.port());
  options.hold_limit_bytes = 256 * 1024;
  options.forward_buffer_bytes = 64 * 1024;
  auto proxy = start_proxy(options);
  proxied_pair pair = connect_through(*proxy, target);
  proxy->set_mode(proxy_mode::partition);
  const std::string flood = pattern(8 << 20, 4);
  CHECK(send_within(pair.client.fd(), flood, patience) < flood.size());
  CHECK(closed_within(pair.client.fd(), patience));
  CHECK(closed_within(pair.upstream.fd(), patience));
  CHECK(
      wait_until([&] { return proxy->stats().connections_reset_over_hold_limit == 1; }, patience));
  const auto stats = proxy->stats();
  CHECK(stats.bytes_held == 0);
  CHECK(stats.connections_open == 0);
  CHECK(stats.bytes_to_target == 0);
}

TEST_CASE(
    "destroying the proxy with connections open and a partition on returns promptly and "
    "closes them",
    "[chaos]") {
  test_listener target;
  auto proxy = start_proxy(options_for(target.port()));
  std::vector<proxied_pair> pairs;
  for (int i = 0; i < 3; ++i)
    pairs.push_back(connect_through(*proxy, target));
  proxy->set_mode(proxy_mode::partition);
  const std::string held = pattern(100 * 1024, 5);
  for (auto& pair : pairs)
    CHECK(send_within(pair.client.fd(), held, patience) == held.size());
  CHECK(wait_until([&] { return proxy->stats().bytes_held == 3 * held.size(); }, patience));

  // Destroyed on a thread of its own so that a hang fails the test instead of stalling it.
  std::promise<void> destroyed;
  std::future<void> done = destroyed.get_future();
  std::thread([owned = std::move(proxy), signal = std::move(destroyed)]() mutable {
    owned.reset();
    signal.set_value();
  }).detach();
  REQUIRE(done.wait_for(patience) == std::future_status::ready);
  for (auto& pair : pairs) {
    CHECK(closed_within(pair.client.fd(), patience));
    CHECK(closed_within(pair.upstream.fd(), patience));
  }
}

TEST_CASE("a client is closed when the target refuses the connection", "[chaos]") {
  // A bound socket that does not listen holds the port, and the kernel refuses connections to it.
  test_socket not_listening = bound_socket(false);
  auto proxy = start_proxy(options_for(bound_port(not_listening.fd())));
  test_socket client = connect_to(proxy->port());
  CHECK(closed_within(client.fd(), patience));
  CHECK(wait_until([&] { return proxy->stats().target_connect_failures == 1; }, patience));
  CHECK(proxy->stats().connections_open == 0);
}

TEST_CASE("listening on a port in use fails and names the address and the reason", "[chaos]") {
  test_listener target;
  auto first = start_proxy(options_for(target.port()));
  proxy_options options = options_for(target.port());
  options.listen_port = first->port();
  const auto second = tcp_proxy::start(options);
  REQUIRE_FALSE(second.ok());
  CHECK(second.err().code == errc::io_error);
  const std::string address = "127.0.0.1:" + std::to_string(first->port());
  CHECK_THAT(second.err().message, Catch::Contains(address));
  CHECK_THAT(second.err().message, Catch::Contains(std::strerror(EADDRINUSE)));
}

TEST_CASE("options that cannot work are refused before listening", "[chaos]") {
  const auto no_target = tcp_proxy::start(proxy_options{});
  REQUIRE_FALSE(no_target.ok());
  CHECK(no_target.err().code == errc::invalid_argument);
  proxy_options options = options_for(9);
  options.hold_limit_bytes = 1024;
  options.forward_buffer_bytes = 4096;
  const auto hold_below_forward = tcp_proxy::start(options);
  REQUIRE_FALSE(hold_below_forward.ok());
  CHECK(hold_below_forward.err().code == errc::invalid_argument);
}

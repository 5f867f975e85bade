#include "chaos/tcp_proxy.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "common/log.hpp"

namespace brigade::chaos {
namespace {

using steady = std::chrono::steady_clock;

/// One recv() reads at most this much: large enough for bulk transfers, small enough that a
/// partition overshoots its hold bound by little.
constexpr size_t read_chunk_bytes = 64 * 1024;
/// One socket gives at most this much per turn of the loop, so that one fast sender cannot starve
/// the other connections.
constexpr size_t read_budget_bytes = 1024 * 1024;
constexpr int listen_backlog = 128;
/// How long accepting pauses after the kernel refuses an accept (out of file descriptors): the
/// listener stays readable, and retrying at once would spin.
constexpr auto accept_pause = std::chrono::milliseconds(100);

error os_error(const std::string& what) {
  return error(errc::io_error, what + ": " + std::strerror(errno));
}

std::string host_port(const std::string& host, uint16_t port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

/// Owns one file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// Closes with a TCP reset instead of a FIN, so that the peer learns at once that the connection
/// is gone rather than reading an orderly end of stream.
void abort_fd(unique_fd& fd) {
  if (!fd) return;
  const linger no_linger{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &no_linger, sizeof no_linger);
  fd.reset();
}

void set_no_delay(int fd) {
  // The control plane sends small messages: Nagle's algorithm in the proxy would add latency
  // that the peers do not have without it.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

/// The first address `host` resolves to; `passive` for an address to listen on.
result<socket_address> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* found = nullptr;
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return error(errc::not_found,
                 "tcp_proxy: cannot resolve " + host_port(host, port) + ": " + ::gai_strerror(rc));
  }
  socket_address out;
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  out.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

result<unique_fd> listen_on(const socket_address& address, const std::string& name) {
  const std::string what = "tcp_proxy: listen on " + name;
  unique_fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return os_error(what);
  // A chaos run restarts proxies on the same ports: without SO_REUSEADDR a port stays unusable
  // while the previous proxy's connections linger in TIME_WAIT.
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const auto* raw = reinterpret_cast<const sockaddr*>(&address.storage);
  if (::bind(fd.get(), raw, address.length) != 0) return os_error(what);
  if (::listen(fd.get(), listen_backlog) != 0) return os_error(what);
  return result<unique_fd>(std::move(fd));
}

result<uint16_t> local_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return os_error("tcp_proxy: getsockname");
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

/// Starts a non-blocking connect: the socket turns writable once it has connected or failed.
result<unique_fd> start_connect(const socket_address& target) {
  unique_fd fd(::socket(target.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return os_error("tcp_proxy: socket");
  const auto* raw = reinterpret_cast<const sockaddr*>(&target.storage);
  if (::connect(fd.get(), raw, target.length) != 0 && errno != EINPROGRESS) {
    return os_error("tcp_proxy: connect to the target");
  }
  return result<unique_fd>(std::move(fd));
}

status check(const proxy_options& options) {
  if (options.target_port == 0) {
    return error(errc::invalid_argument,
                 "tcp_proxy: target_port is 0; name the port to forward to");
  }
  if (options.forward_buffer_bytes == 0 || options.max_connections == 0) {
    return error(errc::invalid_argument,
                 "tcp_proxy: forward_buffer_bytes and max_connections must be positive");
  }
  if (options.hold_limit_bytes < options.forward_buffer_bytes) {
    // A partition starting with a full forward buffer would otherwise abort at once.
    return error(errc::invalid_argument, "tcp_proxy: hold_limit_bytes (" +
                                             std::to_string(options.hold_limit_bytes) +
                                             ") is below forward_buffer_bytes (" +
                                             std::to_string(options.forward_buffer_bytes) + ")");
  }
  return ok_status();
}

/// The bytes of one recv(), and when they may be passed on.
struct chunk {
  std::vector<char> bytes;
  size_t sent_bytes = 0;
  steady::time_point due;
};

/// How the side a flow reads from has ended.
enum class source_end { open, fin, failed };

/// The bytes travelling one way through a connection, in the order they were read.
struct flow {
  std::deque<chunk> chunks;
  size_t queued_bytes = 0;
  source_end end = source_end::open;
  /// When the end may be passed on: the delay applies to closes as it does to bytes.
  steady::time_point end_due;
  bool end_passed_on = false;

  /// When the next chunk or the end may be passed on; nullopt when nothing waits.
  std::optional<steady::time_point> next_due() const {
    if (!chunks.empty()) return chunks.front().due;
    if (end != source_end::open && !end_passed_on) return end_due;
    return std::nullopt;
  }
};

enum class phase { held, connecting, open, closed };

struct connection {
  unique_fd client;
  unique_fd target;
  phase state = phase::held;
  flow to_target;  ///< Read from the client, written to the target.
  flow to_client;  ///< Read from the target, written to the client.
};

bool holds_to_target(proxy_mode mode) {
  return mode == proxy_mode::partition || mode == proxy_mode::partition_client_to_target;
}

bool holds_to_client(proxy_mode mode) {
  return mode == proxy_mode::partition || mode == proxy_mode::partition_target_to_client;
}

}  // namespace

const char* to_string(proxy_mode mode) {
  switch (mode) {
    case proxy_mode::pass:
      return "pass";
    case proxy_mode::partition:
      return "partition";
    case proxy_mode::partition_client_to_target:
      return "partition_client_to_target";
    case proxy_mode::partition_target_to_client:
      return "partition_target_to_client";
    case proxy_mode::reset:
      return "reset";
  }
  return "unknown";
}

/// Owns the listener and every connection; only its thread touches them. Other threads change
/// the atomics and wake it through an eventfd.
class tcp_proxy::loop {
 public:
  loop(const proxy_options& options, socket_address target, unique_fd listener, unique_fd wake)
      : delay_ms(options.delay_ms),
        options_(options),
        target_(target),
        listener_(std::move(listener)),
        wake_(std::move(wake)),
        scratch_(read_chunk_bytes) {}

  void run();
  /// Makes run() return soon; from any thread.
  void stop() {
    stopping_.store(true);
    wake();
  }
  /// Interrupts the poll so that the loop reads the mode and delay again; from any thread.
  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }
  proxy_stats stats() const;

  std::atomic<proxy_mode> mode{proxy_mode::pass};
  std::atomic<uint32_t> delay_ms;

 private:
  /// Fills pollfds_ for this turn; returns the poll timeout (-1: none).
  int prepare_poll(proxy_mode m);
  void accept_clients(proxy_mode m);
  void step(connection& c, short client_events, short target_events, proxy_mode m);
  void dial(connection& c);
  void finish_connect(connection& c);
  void receive(int fd, flow& f, bool holding);
  void deliver(connection& c, flow& f, int fd, bool holding, std::atomic<uint64_t>& forwarded);
  void close(connection& c, bool abort);
  bool wants_read(const flow& f, bool holding) const;

  const proxy_options options_;
  const socket_address target_;
  unique_fd listener_;
  unique_fd wake_;
  std::vector<char> scratch_;
  std::vector<std::unique_ptr<connection>> connections_;
  std::vector<pollfd> pollfds_;
  steady::time_point now_ = steady::now();
  steady::time_point accept_resume_at_;
  std::atomic<bool> stopping_{false};

  std::atomic<uint64_t> connections_accepted_{0};
  std::atomic<uint64_t> connections_open_{0};
  std::atomic<uint64_t> bytes_to_target_{0};
  std::atomic<uint64_t> bytes_to_client_{0};
  std::atomic<uint64_t> bytes_held_{0};
  std::atomic<uint64_t> reset_over_hold_limit_{0};
  std::atomic<uint64_t> reset_by_mode_{0};
  std::atomic<uint64_t> connect_failures_{0};
};

void tcp_proxy::loop::run() {
  while (!stopping_.load()) {
    const int timeout_ms = prepare_poll(mode.load());
    const size_t polled = connections_.size();
    const int ready = ::poll(pollfds_.data(), pollfds_.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      log::error("chaos",
                 std::string("tcp_proxy: poll failed, forwarding stops: ") + std::strerror(errno));
      break;
    }
    now_ = steady::now();
    const auto events = [&](size_t index) -> short {
      return ready > 0 ? pollfds_[index].revents : 0;
    };
    if (events(0) != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_.get(), &count, sizeof count);
    }
    // Read after the poll so that a mode set before a peer sent its bytes applies to them.
    const proxy_mode m = mode.load();
    if (events(1) != 0) accept_clients(m);
    for (size_t i = 0; i < connections_.size(); ++i) {
      const bool was_polled = i < polled;
      step(*connections_[i], was_polled ? events(2 + 2 * i) : 0, was_polled ? events(3 + 2 * i) : 0,
           m);
    }
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const auto& c) { return c->state == phase::closed; }),
                       connections_.end());
  }
  for (auto& c : connections_)
    close(*c, true);
  connections_.clear();
}

int tcp_proxy::loop::prepare_poll(proxy_mode m) {
  const steady::time_point now = steady::now();
  std::optional<steady::time_point> wake_at;
  const auto wake_by = [&](steady::time_point t) { wake_at = wake_at ? std::min(*wake_at, t) : t; };
  pollfds_.clear();
  pollfds_.push_back({wake_.get(), POLLIN, 0});
  const bool room = connections_.size() < options_.max_connections;
  const bool accepting = room && now >= accept_resume_at_;
  if (room && !accepting) wake_by(accept_resume_at_);
  pollfds_.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
  for (const auto& c : connections_) {
    short client_events = wants_read(c->to_target, holds_to_target(m)) ? POLLIN : 0;
    short target_events = c->state == phase::connecting ? POLLOUT : 0;
    if (c->state == phase::open) {
      if (wants_read(c->to_client, holds_to_client(m))) target_events |= POLLIN;
      const auto writes = [&](const flow& f, bool holding, short& out_events) {
        const std::optional<steady::time_point> due = f.next_due();
        if (holding || !due) return;
        if (*due <= now && !f.chunks.empty()) {
          out_events |= POLLOUT;
        } else {
          wake_by(*due);
        }
      };
      writes(c->to_target, holds_to_target(m), target_events);
      writes(c->to_client, holds_to_client(m), client_events);
    }
    // A socket polled for nothing would still report POLLHUP and spin the loop: leave it out.
    pollfds_.push_back({client_events != 0 ? c->client.get() : -1, client_events, 0});
    pollfds_.push_back({target_events != 0 ? c->target.get() : -1, target_events, 0});
  }
  if (!wake_at) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*wake_at - now);
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, wait.count()));
}

void tcp_proxy::loop::accept_clients(proxy_mode m) {
  while (connections_.size() < options_.max_connections) {
    unique_fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!client) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      log::warn("chaos", std::string("tcp_proxy: accept: ") + std::strerror(errno));
      accept_resume_at_ = now_ + accept_pause;
      return;
    }
    connections_accepted_.fetch_add(1);
    if (m == proxy_mode::reset) {
      abort_fd(client);
      reset_by_mode_.fetch_add(1);
      continue;
    }
    set_no_delay(client.get());
    auto c = std::make_unique<connection>();
    c->client = std::move(client);
    connections_.push_back(std::move(c));
    connections_open_.fetch_add(1);
  }
}

// One turn for one connection: whatever its sockets reported, and whatever the mode and the
// clock now allow, whether or not a socket reported anything.
void tcp_proxy::loop::step(connection& c, short client_events, short target_events, proxy_mode m) {
  if (m == proxy_mode::reset) {
    if (c.state == phase::closed) return;
    close(c, true);
    reset_by_mode_.fetch_add(1);
    return;
  }
  const bool hold_up = holds_to_target(m);
  const bool hold_down = holds_to_client(m);
  if (c.state == phase::held && m == proxy_mode::pass) dial(c);
  if (c.state == phase::connecting && target_events != 0) finish_connect(c);
  if (c.state == phase::closed) return;
  if (client_events != 0) receive(c.client.get(), c.to_target, hold_up);
  if (target_events != 0 && c.state == phase::open) {
    receive(c.target.get(), c.to_client, hold_down);
  }
  const size_t limit = options_.hold_limit_bytes;
  if ((hold_up && c.to_target.queued_bytes > limit) ||
      (hold_down && c.to_client.queued_bytes > limit)) {
    close(c, true);
    reset_over_hold_limit_.fetch_add(1);
    return;
  }
  if (c.state != phase::open) return;
  deliver(c, c.to_target, c.target.get(), hold_up, bytes_to_target_);
  if (c.state != phase::open) return;
  deliver(c, c.to_client, c.client.get(), hold_down, bytes_to_client_);
  if (c.state == phase::open && c.to_target.end_passed_on && c.to_client.end_passed_on) {
    close(c, false);
  }
}

void tcp_proxy::loop::dial(connection& c) {
  result<unique_fd> target = start_connect(target_);
  if (!target) {
    log::debug("chaos", target.err().describe());
    close(c, false);
    connect_failures_.fetch_add(1);
    return;
  }
  c.target = std::move(*target);
  c.state = phase::connecting;
}

void tcp_proxy::loop::finish_connect(connection& c) {
  int failure = 0;
  socklen_t length = sizeof failure;
  if (::getsockopt(c.target.get(), SOL_SOCKET, SO_ERROR, &failure, &length) != 0) failure = errno;
  if (failure != 0) {
    log::debug("chaos", std::string("tcp_proxy: connect to the target: ") + std::strerror(failure));
    close(c, false);
    connect_failures_.fetch_add(1);
    return;
  }
  set_no_delay(c.target.get());
  c.state = phase::open;
}

bool tcp_proxy::loop::wants_read(const flow& f, bool holding) const {
  if (f.end != source_end::open) return false;
  // Holding reads on past the bound so that step() sees the overflow and aborts; forwarding
  // stops at its bound so that a slow reader slows the sender (back-pressure).
  return holding ? f.queued_bytes <= options_.hold_limit_bytes
                 : f.queued_bytes < options_.forward_buffer_bytes;
}

void tcp_proxy::loop::receive(int fd, flow& f, bool holding) {
  size_t taken_bytes = 0;
  while (wants_read(f, holding) && taken_bytes < read_budget_bytes) {
    const ssize_t n = ::recv(fd, scratch_.data(), scratch_.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    const auto due = now_ + std::chrono::milliseconds(delay_ms.load());
    if (n <= 0) {
      f.end = n == 0 ? source_end::fin : source_end::failed;
      f.end_due = due;
      return;
    }
    const auto size = static_cast<size_t>(n);
    f.chunks.push_back(chunk{std::vector<char>(scratch_.begin(), scratch_.begin() + n), 0, due});
    f.queued_bytes += size;
    bytes_held_.fetch_add(size);
    taken_bytes += size;
  }
}

void tcp_proxy::loop::deliver(connection& c, flow& f, int fd, bool holding,
                              std::atomic<uint64_t>& forwarded) {
  if (holding) return;
  while (!f.chunks.empty() && f.chunks.front().due <= now_) {
    chunk& front = f.chunks.front();
    const size_t left_bytes = front.bytes.size() - front.sent_bytes;
    const ssize_t n = ::send(fd, front.bytes.data() + front.sent_bytes, left_bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // The receiver is gone and nothing more can reach it: end the sender's side too.
    if (n < 0) return close(c, true);
    const auto size = static_cast<size_t>(n);
    assert(size <= left_bytes && size <= f.queued_bytes);
    front.sent_bytes += size;
    f.queued_bytes -= size;
    bytes_held_.fetch_sub(size);
    forwarded.fetch_add(size);
    if (front.sent_bytes == front.bytes.size()) f.chunks.pop_front();
  }
  if (!f.chunks.empty() || f.end == source_end::open || f.end_passed_on || f.end_due > now_) {
    return;
  }
  f.end_passed_on = true;
  // A reset is passed on as a reset, a FIN as a FIN: the receiver may still answer after a FIN.
  if (f.end == source_end::failed) return close(c, true);
  ::shutdown(fd, SHUT_WR);
}

// Callers count why a connection closed only after closing it, so that whoever reads a count
// also finds the connection gone from connections_open.
void tcp_proxy::loop::close(connection& c, bool abort) {
  if (c.state == phase::closed) return;
  if (abort) {
    abort_fd(c.client);
    abort_fd(c.target);
  } else {
    c.client.reset();
    c.target.reset();
  }
  assert(bytes_held_.load() >= c.to_target.queued_bytes + c.to_client.queued_bytes);
  bytes_held_.fetch_sub(c.to_target.queued_bytes + c.to_client.queued_bytes);
  c.to_target = flow{};
  c.to_client = flow{};
  c.state = phase::closed;
  connections_open_.fetch_sub(1);
}

proxy_stats tcp_proxy::loop::stats() const {
  proxy_stats s;
  s.connections_accepted = connections_accepted_.load();
  s.connections_open = connections_open_.load();
  s.bytes_to_target = bytes_to_target_.load();
  s.bytes_to_client = bytes_to_client_.load();
  s.bytes_held = bytes_held_.load();
  s.connections_reset_over_hold_limit = reset_over_hold_limit_.load();
  s.connections_reset_by_mode = reset_by_mode_.load();
  s.target_connect_failures = connect_failures_.load();
  return s;
}

result<std::unique_ptr<tcp_proxy>> tcp_proxy::start(const proxy_options& options) {
  if (status s = check(options); !s) return s.err();
  result<socket_address> listen_address = resolve(options.listen_host, options.listen_port, true);
  if (!listen_address) return listen_address.err();
  result<socket_address> target = resolve(options.target_host, options.target_port, false);
  if (!target) return target.err();
  result<unique_fd> listener =
      listen_on(*listen_address, host_port(options.listen_host, options.listen_port));
  if (!listener) return listener.err();
  result<uint16_t> port = local_port(listener->get());
  if (!port) return port.err();
  unique_fd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return os_error("tcp_proxy: eventfd");
  auto forwarding = std::make_unique<loop>(options, *target, std::move(*listener), std::move(wake));
  return std::unique_ptr<tcp_proxy>(new tcp_proxy(std::move(forwarding), *port));
}

tcp_proxy::tcp_proxy(std::unique_ptr<loop> forwarding, uint16_t port)
    : loop_(std::move(forwarding)), port_(port), thread_([l = loop_.get()] { l->run(); }) {}

tcp_proxy::~tcp_proxy() {
  loop_->stop();
  thread_.join();
}

void tcp_proxy::set_mode(proxy_mode mode) {
  loop_->mode.store(mode);
  loop_->wake();
}

proxy_mode tcp_proxy::mode() const {
  return loop_->mode.load();
}

void tcp_proxy::set_delay_ms(uint32_t delay_ms) {
  loop_->delay_ms.store(delay_ms);
  loop_->wake();
}

uint32_t tcp_proxy::delay_ms() const {
  return loop_->delay_ms.load();
}

proxy_stats tcp_proxy::stats() const {
  return loop_->stats();
}

}  // namespace brigade::chaos

// brigade_session: brigade's transport against a peer process that the benchmark spawns
// itself, with the pipe to that process standing in for the control plane.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "bench/sample_statistics.hpp"
#include "bench/transport_bench.hpp"
#include "bench/transport_driver.hpp"
#include "bench/transport_wire.hpp"
#include "common/hex.hpp"
#include "common/subprocess.hpp"
#include "transport/node_transport.hpp"

namespace brigade::bench::transport_bench {

using namespace brigade::transport;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

/// CPUs for the two progress threads: apart when there are two, like perftest's -c 0 / -c 1.
int driver_cpu() {
  return std::thread::hardware_concurrency() > 1 ? 0 : -1;
}
int peer_cpu() {
  return std::thread::hardware_concurrency() > 1 ? 1 : -1;
}

/// The peer's next protocol line. UCX writes its own log lines ("[time] [host:pid] ...") to
/// stdout, which is this pipe, so those are passed on to stderr and skipped.
result<std::string> read_peer_line(subprocess& peer) {
  while (true) {
    result<std::string> line = peer.read_line(milliseconds(30000));
    if (!line || line->empty() || (*line)[0] != '[') return line;
    std::fprintf(stderr, "peer: %s\n", line->c_str());
  }
}

/// Messages in flight at once for a payload size: enough to keep the link busy (measured: 1 MiB
/// payloads over CMA need 16 or more in flight; 64 MiB ones gain nothing beyond 2).
int window_for(std::size_t bytes) {
  if (bytes <= 4096) return 256;
  if (bytes <= 4 * mib) return 32;
  return 2;
}

}  // namespace

struct brigade_session::state {
  std::optional<subprocess> peer;
  std::unique_ptr<node_transport> transport;
  std::unique_ptr<transport_driver> driver;

  ~state() {
    // The transport goes first: its handlers point into the driver.
    transport.reset();
    driver.reset();
    if (!peer) return;
    peer->close_stdin();
    peer->wait(milliseconds(10000));
  }
};

brigade_session::brigade_session(std::unique_ptr<state> s) : state_(std::move(s)) {}
brigade_session::~brigade_session() = default;

result<std::unique_ptr<brigade_session>> brigade_session::open(const tls_case& tls,
                                                               std::uint32_t busy_poll_us,
                                                               const std::string& self_exe) {
  transport_config config;
  config.self_id = driver_node;
  config.tls = tls.tls;
  config.net_devices = "lo";
  config.progress_cpu = driver_cpu();
  config.busy_poll_us = busy_poll_us;
  result<std::unique_ptr<node_transport>> started = node_transport::start(config);
  if (!started) return started.err();
  subprocess::options opts;
  opts.argv = {self_exe,         "bench",
               "transport",      "--peer",
               "--ucx-tls",      tls.tls,
               "--cpu",          std::to_string(peer_cpu()),
               "--busy-poll-us", std::to_string(busy_poll_us)};
  result<subprocess> peer = subprocess::spawn(opts);
  if (!peer) return peer.err();
  auto s = std::make_unique<state>();
  s->peer = std::move(*peer);
  s->transport = std::move(*started);
  s->driver = std::make_unique<transport_driver>(*s->transport);
  result<std::string> line = read_peer_line(*s->peer);
  if (!line || line->rfind("ADDR ", 0) != 0) {
    return error(errc::unavailable,
                 "bench transport: the peer did not start: " + (line ? *line : line.err().message));
  }
  const auto address = from_hex(line->substr(5));
  if (!address) {
    return error(errc::unavailable, "bench transport: the peer's address is not hex: " + *line);
  }
  status connected = s->transport->connect(peer_node, byte_view(address->data(), address->size()));
  if (!connected) return connected.err();
  s->peer->write_line("ADDR " + to_hex(s->transport->local_address()));
  line = read_peer_line(*s->peer);
  if (!line || *line != "READY") {
    return error(errc::unavailable, "bench transport: the peer could not connect back: " +
                                        (line ? *line : line.err().message));
  }
  return std::unique_ptr<brigade_session>(new brigade_session(std::move(s)));
}

result<latency_figures> brigade_session::latency(int warmup, int count) {
  result<std::vector<double>> round_trips = state_->driver->ping_pong(warmup, count);
  if (!round_trips) return round_trips.err();
  return latency_figures{quantile(*round_trips, 0.5) / 2, quantile(*round_trips, 0.99) / 2};
}

result<double> brigade_session::cross_thread_latency_median_us(int count) {
  result<double> round_trip = state_->driver->cross_thread_round_trip_us(count);
  if (!round_trip) return round_trip.err();
  return *round_trip / 2;
}

result<double> brigade_session::message_rate(int count) {
  result<double> seconds = state_->driver->stream_seconds(8, count, window_for(8));
  if (!seconds) return seconds.err();
  return count / *seconds;
}

result<double> brigade_session::bandwidth(std::size_t bytes, int count) {
  // A short warm-up registers the payload and faults in the peer's buffers.
  if (result<double> warm = state_->driver->stream_seconds(bytes, 2, window_for(bytes)); !warm) {
    return warm.err();
  }
  result<double> seconds = state_->driver->stream_seconds(bytes, count, window_for(bytes));
  if (!seconds) return seconds.err();
  return static_cast<double>(bytes) * count / *seconds / static_cast<double>(mib);
}

std::string brigade_session::lanes() {
  result<std::string> text = state_->transport->describe_peer(peer_node);
  return text ? *text : text.err().describe();
}

}  // namespace brigade::bench::transport_bench

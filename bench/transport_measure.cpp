// Measures brigade's transport against a peer process that the benchmark spawns itself.
#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "bench/transport_bench.hpp"
#include "bench/transport_driver.hpp"
#include "bench/transport_wire.hpp"
#include "common/subprocess.hpp"
#include "transport/node_transport.hpp"

namespace brigade::bench::transport_bench {
namespace {

using namespace brigade::transport;
using std::chrono::milliseconds;

constexpr std::size_t mib = std::size_t{1} << 20;

/// The driver's transport, the peer process and the connection between them.
struct session {
  subprocess peer;
  std::unique_ptr<node_transport> transport;
};

/// CPUs for the two progress threads: apart when there are two, like perftest's -c 0 / -c 1.
int driver_cpu() {
  return std::thread::hardware_concurrency() > 1 ? 0 : -1;
}
int peer_cpu() {
  return std::thread::hardware_concurrency() > 1 ? 1 : -1;
}

result<session> open_session(const tls_case& tls, std::uint32_t busy_poll_us,
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
  session s{std::move(*peer), std::move(*started)};
  result<std::string> line = s.peer.read_line(milliseconds(30000));
  if (!line || line->rfind("ADDR ", 0) != 0) {
    return error(errc::unavailable,
                 "bench transport: the peer did not start: " + (line ? *line : line.err().message));
  }
  const std::vector<std::byte> peer_address = from_hex(line->substr(5));
  if (status c =
          s.transport->connect(peer_node, byte_view(peer_address.data(), peer_address.size()));
      !c) {
    return c.err();
  }
  s.peer.write_line("ADDR " + to_hex(s.transport->local_address()));
  line = s.peer.read_line(milliseconds(30000));
  if (!line || *line != "READY") {
    return error(errc::unavailable, "bench transport: the peer could not connect back: " +
                                        (line ? *line : line.err().message));
  }
  return s;
}

double percentile(std::vector<double> samples, double rank) {
  const auto at = static_cast<std::size_t>(rank * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(at),
                   samples.end());
  return samples[at];
}

double mib_per_s(std::size_t bytes, int count, double seconds) {
  return static_cast<double>(bytes) * count / seconds / static_cast<double>(mib);
}

void close_session(session& s) {
  s.transport.reset();
  s.peer.close_stdin();
  s.peer.wait(milliseconds(10000));
}

status measure_figures(transport_driver& driver, session& s, const iterations& n,
                       brigade_figures& out) {
  result<std::vector<double>> round_trips = driver.ping_pong(n.warmup, n.latency);
  if (!round_trips) return round_trips.err();
  out.latency_median_us = percentile(*round_trips, 0.5) / 2;
  out.latency_p99_us = percentile(*round_trips, 0.99) / 2;
  result<double> cross = driver.cross_thread_round_trip_us(std::max(n.latency / 10, 100));
  if (!cross) return cross.err();
  out.cross_thread_latency_median_us = *cross / 2;

  if (result<double> warm = driver.stream_seconds(8, n.warmup, 256); !warm) return warm.err();
  result<double> rate = driver.stream_seconds(8, n.message_rate, 256);
  if (!rate) return rate.err();
  out.message_rate_per_s = n.message_rate / *rate;

  if (result<double> warm = driver.stream_seconds(mib, 10, 8); !warm) return warm.err();
  result<double> one = driver.stream_seconds(mib, n.bandwidth_1mib, 8);
  if (!one) return one.err();
  out.bandwidth_1mib = mib_per_s(mib, n.bandwidth_1mib, *one);

  if (result<double> warm = driver.stream_seconds(64 * mib, 2, 2); !warm) return warm.err();
  result<double> big = driver.stream_seconds(64 * mib, n.bandwidth_64mib, 2);
  if (!big) return big.err();
  out.bandwidth_64mib = mib_per_s(64 * mib, n.bandwidth_64mib, *big);

  result<std::string> lanes = s.transport->describe_peer(peer_node);
  if (lanes) out.lanes = *lanes;
  return ok_status();
}

status measure_main(session& s, const iterations& n, brigade_figures& out) {
  transport_driver driver(*s.transport);
  status measured = measure_figures(driver, s, n, out);
  // The transport goes first: its handlers point into the driver.
  close_session(s);
  return measured;
}

}  // namespace

result<brigade_figures> measure_brigade(const tls_case& tls, const iterations& n,
                                        const std::string& self_exe) {
  brigade_figures out;
  {
    result<session> s = open_session(tls, transport_config{}.busy_poll_us, self_exe);
    if (!s) return s.err();
    if (status measured = measure_main(*s, n, out); !measured) return measured.err();
  }
  // The same ping-pong with busy polling off shows what the busy-poll phase buys.
  result<session> s = open_session(tls, 0, self_exe);
  if (!s) return s.err();
  transport_driver driver(*s->transport);
  const int count = std::max(n.latency / 4, 100);
  result<std::vector<double>> round_trips = driver.ping_pong(n.warmup, count);
  close_session(*s);
  if (!round_trips) return round_trips.err();
  out.sleeping_latency_median_us = percentile(*round_trips, 0.5) / 2;
  return out;
}

}  // namespace brigade::bench::transport_bench

// Pieces of `brigade bench transport`: brigade's transport measured between two processes, and
// ucx_perftest measured with the same UCX settings, interleaved metric by metric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace brigade::bench::transport_bench {

/// How much work each measurement does.
struct iterations {
  int warmup = 1000;
  int latency = 20000;
  int message_rate = 200000;
  int bandwidth_1mib = 1000;
  int bandwidth_64mib = 20;
  /// Each metric is measured this many times on each side, alternating; medians are compared.
  int rounds = 3;
};

/// One TLS set to measure: a short name, its UCX_TLS value, and whether brigade runs it with
/// UCX peer-failure handling (ucx_perftest then gets -e too, so both pay for it).
struct tls_case {
  std::string name;
  std::string tls;
  bool peer_errors = false;
};

/// One-way latency (half a round trip) in microseconds.
struct latency_figures {
  double median_us = 0;
  double p99_us = 0;
};

/// Runs the peer side (spawned by brigade_session): prints its address, connects back, echoes
/// pings and acknowledges bulk rounds until stdin closes.
int run_peer(const std::string& tls, int cpu, std::uint32_t busy_poll_us);

/// brigade's transport in this process talking to a peer process the session spawns.
class brigade_session {
 public:
  static result<std::unique_ptr<brigade_session>> open(const tls_case& tls,
                                                       std::uint32_t busy_poll_us,
                                                       const std::string& self_exe);
  ~brigade_session();

  /// 8 B ping-pong driven from the progress thread.
  result<latency_figures> latency(int warmup, int count);
  /// 8 B ping-pong where another thread sends each ping and sleeps until its pong.
  result<double> cross_thread_latency_median_us(int count);
  /// 8 B messages per second, up to the peer's acknowledgement of the last.
  result<double> message_rate(int count);
  /// MiB/s (2^20 bytes per second, as ucx_perftest counts) for `count` payloads of `bytes`.
  result<double> bandwidth(std::size_t bytes, int count);
  /// UCX's description of the endpoint's lanes.
  std::string lanes();

 private:
  struct state;
  explicit brigade_session(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// ucx_perftest as server and client with the same UCX_TLS and UCX_NET_DEVICES=lo, pinned to
/// the same CPUs as brigade's progress threads.
result<latency_figures> perftest_latency(const tls_case& tls, int warmup, int count);
result<double> perftest_message_rate(const tls_case& tls, int warmup, int count);
result<double> perftest_bandwidth(const tls_case& tls, std::size_t bytes, int count);

}  // namespace brigade::bench::transport_bench

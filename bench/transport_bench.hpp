// Pieces of `brigade bench transport`: brigade's transport measured between two processes, and
// ucx_perftest measured with the same UCX settings, side by side.
#pragma once

#include <cstdint>
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
};

/// One TLS set to measure: its UCX_TLS value, a short name, and the error mode brigade uses.
struct tls_case {
  std::string name;
  std::string tls;
  bool peer_errors = false;
};

/// Figures for one side of the comparison. Latencies are one-way (half a round trip), in
/// microseconds; bandwidths in MiB/s (2^20 bytes per second, as ucx_perftest counts).
struct figures {
  double latency_median_us = 0;
  double latency_p99_us = 0;
  double message_rate_per_s = 0;
  double bandwidth_1mib = 0;
  double bandwidth_64mib = 0;
};

struct brigade_figures : figures {
  /// The same 8 B round trip started from a thread other than the progress thread.
  double cross_thread_latency_median_us = 0;
  /// Round-trip median with busy polling off (the progress thread sleeps between messages).
  double sleeping_latency_median_us = 0;
  /// UCX's lanes for the endpoint, as UCX describes them.
  std::string lanes;
};

/// Runs the peer side (spawned by the driver): prints its address, connects back, echoes pings
/// and acknowledges bulk rounds until stdin closes.
int run_peer(const std::string& tls, int cpu, std::uint32_t busy_poll_us);

/// Spawns the peer from `self_exe` and measures brigade's transport.
result<brigade_figures> measure_brigade(const tls_case& tls, const iterations& n,
                                        const std::string& self_exe);

/// Runs ucx_perftest as server and client with the same UCX_TLS and UCX_NET_DEVICES=lo.
result<figures> measure_perftest(const tls_case& tls, const iterations& n);

}  // namespace brigade::bench::transport_bench

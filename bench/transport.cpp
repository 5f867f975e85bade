// `brigade bench transport`: brigade's UCX transport between two processes beside ucx_perftest
// with the same UCX_TLS and UCX_NET_DEVICES=lo, for shared memory and for TCP.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/transport_bench.hpp"

namespace brigade::bench {
namespace {

using namespace transport_bench;

struct comparison {
  tls_case tls;
  brigade_figures ours;
  figures perftest;
};

constexpr double bandwidth_goal = 0.8;
constexpr double latency_goal = 2.0;

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

std::vector<tls_case> cases_for(const std::string& which) {
  const tls_case shm{"shm", "posix,sysv,cma,self", false};
  const tls_case tcp{"tcp", "tcp", true};
  if (which == "shm") return {shm};
  if (which == "tcp") return {tcp};
  return {shm, tcp};
}

nlohmann::json figures_json(const figures& f) {
  return {{"latency_median_us", f.latency_median_us},
          {"latency_p99_us", f.latency_p99_us},
          {"message_rate_per_s", f.message_rate_per_s},
          {"bandwidth_1mib_mib_per_s", f.bandwidth_1mib},
          {"bandwidth_64mib_mib_per_s", f.bandwidth_64mib}};
}

nlohmann::json comparison_json(const comparison& c) {
  nlohmann::json ours = figures_json(c.ours);
  ours["cross_thread_latency_median_us"] = c.ours.cross_thread_latency_median_us;
  ours["no_busy_poll_latency_median_us"] = c.ours.sleeping_latency_median_us;
  ours["lanes"] = c.ours.lanes;
  const double lat = ratio(c.ours.latency_median_us, c.perftest.latency_median_us);
  const double bw1 = ratio(c.ours.bandwidth_1mib, c.perftest.bandwidth_1mib);
  const double bw64 = ratio(c.ours.bandwidth_64mib, c.perftest.bandwidth_64mib);
  return {{"tls", c.tls.name},
          {"ucx_tls", c.tls.tls},
          {"ucx_net_devices", "lo"},
          {"error_mode", c.tls.peer_errors ? "peer" : "none"},
          {"brigade", ours},
          {"ucx_perftest", figures_json(c.perftest)},
          {"ratios",
           {{"latency_median", lat},
            {"latency_p99", ratio(c.ours.latency_p99_us, c.perftest.latency_p99_us)},
            {"message_rate", ratio(c.ours.message_rate_per_s, c.perftest.message_rate_per_s)},
            {"bandwidth_1mib", bw1},
            {"bandwidth_64mib", bw64}}},
          {"goals_met",
           {{"latency", lat <= latency_goal},
            {"bandwidth_1mib", bw1 >= bandwidth_goal},
            {"bandwidth_64mib", bw64 >= bandwidth_goal}}}};
}

void print_row(const char* what, double ours, double theirs, const char* goal, bool met) {
  const double r = ratio(ours, theirs);
  std::printf("  %-34s %12.2f %14.2f %8.2fx  %s%s\n", what, ours, theirs, r, goal,
              *goal ? (met ? "  ok" : "  MISSED") : "");
}

void print_table(const comparison& c) {
  std::printf("\nUCX_TLS=%s  UCX_NET_DEVICES=lo  error mode %s (perftest%s)\n", c.tls.tls.c_str(),
              c.tls.peer_errors ? "peer" : "none", c.tls.peer_errors ? " -e" : "");
  std::printf("  %-34s %12s %14s %9s  %s\n", "", "brigade", "ucx_perftest", "ratio", "goal");
  const brigade_figures& o = c.ours;
  const figures& p = c.perftest;
  const double lat = ratio(o.latency_median_us, p.latency_median_us);
  print_row("8 B latency, median (us, one-way)", o.latency_median_us, p.latency_median_us, "<= 2x",
            lat <= latency_goal);
  print_row("8 B latency, p99 (us, one-way)", o.latency_p99_us, p.latency_p99_us, "", false);
  print_row("8 B message rate (msg/s)", o.message_rate_per_s, p.message_rate_per_s, "", false);
  print_row("1 MiB bandwidth (MiB/s)", o.bandwidth_1mib, p.bandwidth_1mib, ">= 0.8x",
            ratio(o.bandwidth_1mib, p.bandwidth_1mib) >= bandwidth_goal);
  print_row("64 MiB bandwidth (MiB/s)", o.bandwidth_64mib, p.bandwidth_64mib, ">= 0.8x",
            ratio(o.bandwidth_64mib, p.bandwidth_64mib) >= bandwidth_goal);
  std::printf(
      "  brigade only: 8 B latency sent from another thread %.2f us; with busy polling "
      "off %.2f us (one-way medians)\n",
      o.cross_thread_latency_median_us, o.sleeping_latency_median_us);
}

}  // namespace

int transport(int argc, char** argv) {
  CLI::App app{
      "brigade's UCX transport beside ucx_perftest (8 B latency and rate, 1 MiB and "
      "64 MiB bandwidth)"};
  bool json = false;
  bool quick = false;
  std::string which = "both";
  bool peer = false;
  bool brigade_only = false;
  std::string peer_tls;
  int cpu = -1;
  std::uint32_t busy_poll_us = 0;
  app.add_flag("--json", json, "print one JSON object with every figure");
  app.add_option("--tls", which, "transports to measure: tcp, shm or both")
      ->check(CLI::IsMember({"tcp", "shm", "both"}));
  app.add_flag("--quick", quick, "fewer iterations (a smoke run; noisier figures)");
  app.add_flag("--brigade-only", brigade_only, "skip ucx_perftest (for profiling brigade)");
  app.add_flag("--peer", peer, "internal: run as the benchmark's peer process")->group("");
  app.add_option("--ucx-tls", peer_tls, "internal: the peer's UCX_TLS")->group("");
  app.add_option("--cpu", cpu, "internal: the peer's progress CPU")->group("");
  app.add_option("--busy-poll-us", busy_poll_us, "internal: the peer's busy poll")->group("");
  CLI11_PARSE(app, argc, argv);
  if (peer) return run_peer(peer_tls, cpu, busy_poll_us);

  iterations n;
  if (quick) n = iterations{100, 2000, 20000, 100, 4};
  std::vector<comparison> results;
  for (const tls_case& tls : cases_for(which)) {
    if (!json) std::fprintf(stderr, "measuring %s ...\n", tls.name.c_str());
    result<brigade_figures> ours = measure_brigade(tls, n, "/proc/self/exe");
    if (!ours) {
      std::fprintf(stderr, "bench transport: %s\n", ours.err().describe().c_str());
      return 1;
    }
    result<figures> theirs = brigade_only ? result<figures>(figures{}) : measure_perftest(tls, n);
    if (!theirs) {
      std::fprintf(stderr, "bench transport: %s\n", theirs.err().describe().c_str());
      return 1;
    }
    results.push_back(comparison{tls, *ours, *theirs});
  }
  if (json) {
    nlohmann::json out = {{"benchmark", "transport"},
                          {"iterations",
                           {{"latency", n.latency},
                            {"message_rate", n.message_rate},
                            {"bandwidth_1mib", n.bandwidth_1mib},
                            {"bandwidth_64mib", n.bandwidth_64mib}}},
                          {"results", nlohmann::json::array()}};
    for (const comparison& c : results)
      out["results"].push_back(comparison_json(c));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const comparison& c : results)
      print_table(c);
  }
  return 0;
}

}  // namespace brigade::bench

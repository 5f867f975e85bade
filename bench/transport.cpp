// `brigade bench transport`: brigade's UCX transport between two processes beside ucx_perftest
// with the same UCX_TLS and UCX_NET_DEVICES=lo, for shared memory and for TCP.
//
// This machine is shared and noisy, so each metric is measured in alternating rounds (brigade,
// then perftest, then brigade, ...) and the medians are compared: load that comes and goes hits
// both sides alike.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/transport_bench.hpp"
#include "transport/transport_config.hpp"

namespace brigade::bench {
namespace {

using namespace transport_bench;

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr double bandwidth_goal = 0.8;
constexpr double latency_goal = 2.0;

/// One metric on both sides: the per-round values and their medians.
struct paired {
  std::vector<double> ours;
  std::vector<double> theirs;
  double ours_median() const { return median(ours); }
  double theirs_median() const { return median(theirs); }
  double ratio() const { return theirs_median() > 0 ? ours_median() / theirs_median() : 0; }
  /// False with --brigade-only: there is nothing to compare with.
  bool compared() const { return !theirs.empty(); }
  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
};

struct comparison {
  tls_case tls;
  paired latency_median;
  paired latency_p99;
  paired message_rate;
  paired bandwidth_1mib;
  paired bandwidth_64mib;
  double cross_thread_latency_us = 0;
  double no_busy_poll_latency_us = 0;
  std::string lanes;
};

std::vector<tls_case> cases_for(const std::string& which) {
  const tls_case shm{"shm", "posix,sysv,cma,self", false};
  const tls_case tcp{"tcp", "tcp", true};
  if (which == "shm") return {shm};
  if (which == "tcp") return {tcp};
  return {shm, tcp};
}

/// Adds one round of every metric, brigade's first, then perftest's.
status measure_round(brigade_session& ours, const tls_case& tls, const iterations& n, bool perftest,
                     comparison& c) {
  result<latency_figures> lat = ours.latency(n.warmup, n.latency);
  if (!lat) return lat.err();
  c.latency_median.ours.push_back(lat->median_us);
  c.latency_p99.ours.push_back(lat->p99_us);
  if (perftest) {
    result<latency_figures> p = perftest_latency(tls, n.warmup, n.latency);
    if (!p) return p.err();
    c.latency_median.theirs.push_back(p->median_us);
    c.latency_p99.theirs.push_back(p->p99_us);
  }
  result<double> rate = ours.message_rate(n.message_rate);
  if (!rate) return rate.err();
  c.message_rate.ours.push_back(*rate);
  if (perftest) {
    result<double> p = perftest_message_rate(tls, n.warmup, n.message_rate);
    if (!p) return p.err();
    c.message_rate.theirs.push_back(*p);
  }
  const std::pair<std::size_t, int> sizes[] = {{mib, n.bandwidth_1mib},
                                               {64 * mib, n.bandwidth_64mib}};
  for (const auto& [bytes, count] : sizes) {
    paired& into = bytes == mib ? c.bandwidth_1mib : c.bandwidth_64mib;
    result<double> bw = ours.bandwidth(bytes, count);
    if (!bw) return bw.err();
    into.ours.push_back(*bw);
    if (perftest) {
      result<double> p = perftest_bandwidth(tls, bytes, count);
      if (!p) return p.err();
      into.theirs.push_back(*p);
    }
  }
  return ok_status();
}

result<comparison> compare(const tls_case& tls, const iterations& n, bool perftest) {
  comparison c;
  c.tls = tls;
  {
    result<std::unique_ptr<brigade_session>> ours = brigade_session::open(
        tls, ::brigade::transport::transport_config{}.busy_poll_us, "/proc/self/exe");
    if (!ours) return ours.err();
    for (int round = 0; round < n.rounds; ++round) {
      if (status s = measure_round(**ours, tls, n, perftest, c); !s) return s.err();
    }
    result<double> cross = (*ours)->cross_thread_latency_median_us(std::max(n.latency / 10, 100));
    if (!cross) return cross.err();
    c.cross_thread_latency_us = *cross;
    c.lanes = (*ours)->lanes();
  }
  // The same ping-pong with busy polling off shows what the busy-poll phase buys.
  result<std::unique_ptr<brigade_session>> sleepy = brigade_session::open(tls, 0, "/proc/self/exe");
  if (!sleepy) return sleepy.err();
  result<latency_figures> lat = (*sleepy)->latency(n.warmup, std::max(n.latency / 4, 100));
  if (!lat) return lat.err();
  c.no_busy_poll_latency_us = lat->median_us;
  return c;
}

// Figures ucx_perftest did not measure (--brigade-only) are null, not 0.
nlohmann::json paired_json(const paired& p) {
  const nlohmann::json none;
  return {{"brigade", p.ours_median()},
          {"ucx_perftest", p.compared() ? nlohmann::json(p.theirs_median()) : none},
          {"ratio", p.compared() ? nlohmann::json(p.ratio()) : none},
          {"brigade_rounds", p.ours},
          {"ucx_perftest_rounds", p.theirs}};
}

nlohmann::json comparison_json(const comparison& c) {
  const double lat = c.latency_median.ratio();
  const double bw1 = c.bandwidth_1mib.ratio();
  const double bw64 = c.bandwidth_64mib.ratio();
  const nlohmann::json goals =
      c.latency_median.compared()
          ? nlohmann::json{{"latency_at_most_2x", lat <= latency_goal},
                           {"bandwidth_1mib_at_least_0_8x", bw1 >= bandwidth_goal},
                           {"bandwidth_64mib_at_least_0_8x", bw64 >= bandwidth_goal}}
          : nlohmann::json();
  return {{"tls", c.tls.name},
          {"ucx_tls", c.tls.tls},
          {"ucx_net_devices", "lo"},
          {"error_mode", c.tls.peer_errors ? "peer" : "none"},
          {"latency_median_us", paired_json(c.latency_median)},
          {"latency_p99_us", paired_json(c.latency_p99)},
          {"message_rate_per_s", paired_json(c.message_rate)},
          {"bandwidth_1mib_mib_per_s", paired_json(c.bandwidth_1mib)},
          {"bandwidth_64mib_mib_per_s", paired_json(c.bandwidth_64mib)},
          {"brigade_cross_thread_latency_median_us", c.cross_thread_latency_us},
          {"brigade_no_busy_poll_latency_median_us", c.no_busy_poll_latency_us},
          {"brigade_lanes", c.lanes},
          {"goals_met", goals}};
}

void print_row(const char* what, const paired& p, const char* goal, bool met) {
  if (!p.compared()) {  // --brigade-only: no ratio, so no verdict either
    std::printf("  %-34s %12.2f %14s %9s  %s\n", what, p.ours_median(), "-", "-", *goal ? "-" : "");
    return;
  }
  std::printf("  %-34s %12.2f %14.2f %8.2fx  %s%s\n", what, p.ours_median(), p.theirs_median(),
              p.ratio(), goal, *goal ? (met ? "  met" : "  MISSED") : "");
}

void print_table(const comparison& c, int rounds) {
  std::printf("\nUCX_TLS=%s  UCX_NET_DEVICES=lo  error mode %s%s  (medians of %d rounds)\n",
              c.tls.tls.c_str(), c.tls.peer_errors ? "peer" : "none",
              c.tls.peer_errors ? ", ucx_perftest -e" : "", rounds);
  std::printf("  %-34s %12s %14s %9s  %s\n", "", "brigade", "ucx_perftest", "ratio", "goal");
  print_row("8 B latency, median (us, one-way)", c.latency_median, "<= 2x",
            c.latency_median.ratio() <= latency_goal);
  print_row("8 B latency, p99 (us, one-way)", c.latency_p99, "", false);
  print_row("8 B message rate (msg/s)", c.message_rate, "", false);
  print_row("1 MiB bandwidth (MiB/s)", c.bandwidth_1mib, ">= 0.8x",
            c.bandwidth_1mib.ratio() >= bandwidth_goal);
  print_row("64 MiB bandwidth (MiB/s)", c.bandwidth_64mib, ">= 0.8x",
            c.bandwidth_64mib.ratio() >= bandwidth_goal);
  std::printf(
      "  brigade alone, 8 B one-way median: %.2f us when another thread sends and "
      "sleeps for the answer; %.2f us with busy polling off\n",
      c.cross_thread_latency_us, c.no_busy_poll_latency_us);
}

/// Keeps stdout for the JSON object alone: UCX and anything else that prints goes to stderr
/// while the benchmark runs. Returns the descriptor of the real stdout.
int reserve_stdout_for_json() {
  std::fflush(stdout);
  const int real_stdout = dup(STDOUT_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  return real_stdout;
}

void print_json(const std::vector<comparison>& results, const iterations& n, int out_fd) {
  nlohmann::json out = {{"benchmark", "transport"},
                        {"iterations",
                         {{"latency", n.latency},
                          {"message_rate", n.message_rate},
                          {"bandwidth_1mib", n.bandwidth_1mib},
                          {"bandwidth_64mib", n.bandwidth_64mib},
                          {"rounds", n.rounds}}},
                        {"results", nlohmann::json::array()}};
  for (const comparison& c : results)
    out["results"].push_back(comparison_json(c));
  const std::string text = out.dump(2) + "\n";
  std::fflush(stdout);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n_written = write(out_fd, text.data() + written, text.size() - written);
    if (n_written <= 0) break;
    written += static_cast<std::size_t>(n_written);
  }
}

}  // namespace

int transport(int argc, char** argv) {
  CLI::App app{
      "brigade's UCX transport beside ucx_perftest: 8 B latency and message rate, "
      "1 MiB and 64 MiB bandwidth, over shared memory and TCP"};
  app.option_defaults()->always_capture_default();
  bool json = false;
  bool quick = false;
  bool brigade_only = false;
  std::string which = "both";
  iterations n;
  bool peer = false;
  std::string peer_tls;
  int cpu = -1;
  std::uint32_t busy_poll_us = 0;
  app.add_flag("--json", json, "print one JSON object with every figure");
  app.add_option("--tls", which, "transports to measure: tcp, shm or both")
      ->check(CLI::IsMember({"tcp", "shm", "both"}));
  app.add_option("--rounds", n.rounds, "alternating rounds per metric (medians are compared)")
      ->check(CLI::Range(1, 50));
  app.add_flag("--quick", quick, "fewer iterations and one round (a smoke run; noisy)");
  app.add_flag("--brigade-only", brigade_only, "skip ucx_perftest (for profiling brigade)");
  app.add_flag("--peer", peer, "internal: run as the benchmark's peer process")->group("");
  app.add_option("--ucx-tls", peer_tls, "internal: the peer's UCX_TLS")->group("");
  app.add_option("--cpu", cpu, "internal: the peer's progress CPU")->group("");
  app.add_option("--busy-poll-us", busy_poll_us, "internal: the peer's busy poll")->group("");
  CLI11_PARSE(app, argc, argv);
  if (peer) return run_peer(peer_tls, cpu, busy_poll_us);
  if (quick) n = iterations{100, 2000, 20000, 100, 4, 1};

  const int json_fd = json ? reserve_stdout_for_json() : STDOUT_FILENO;
  std::vector<comparison> results;
  for (const tls_case& tls : cases_for(which)) {
    if (!json) std::fprintf(stderr, "measuring %s ...\n", tls.name.c_str());
    result<comparison> c = compare(tls, n, !brigade_only);
    if (!c) {
      std::fprintf(stderr, "bench transport: %s\n", c.err().describe().c_str());
      return 1;
    }
    results.push_back(std::move(*c));
  }
  if (json) {
    print_json(results, n, json_fd);
  } else {
    for (const comparison& c : results)
      print_table(c, n.rounds);
  }
  return 0;
}

}  // namespace brigade::bench

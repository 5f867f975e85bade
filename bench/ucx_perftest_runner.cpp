// Runs Debian's ucx_perftest (ucx-utils) as a server and a client on loopback and reads the
// figures of its final line.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/transport_bench.hpp"
#include "common/subprocess.hpp"

namespace brigade::bench::transport_bench {
namespace {

using std::chrono::milliseconds;

/// The final figures ucx_perftest prints with -f: iterations, then latency (50%ile or the -R
/// rank, average, overall) in us, bandwidth (average, overall) in MiB/s and message rate
/// (average, overall) per second.
struct perftest_line {
  double percentile_us = 0;
  double bandwidth_overall = 0;
  double message_rate_overall = 0;
};

/// A TCP port nothing listens on right now, for perftest's address exchange.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

result<perftest_line> parse_final_line(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  std::vector<double> numbers;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<double> row;
    double v = 0;
    while (words >> v)
      row.push_back(v);
    if (row.size() >= 8 && words.eof()) numbers = row;
  }
  if (numbers.empty()) {
    return error(errc::bad_format, "ucx_perftest printed no result line:\n" + output);
  }
  return perftest_line{numbers[1], numbers[5], numbers[7]};
}

/// One ucx_perftest run: a server, then a client that connects to it.
result<perftest_line> run_once(const tls_case& tls, const std::vector<std::string>& test_args) {
  const std::vector<std::pair<std::string, std::string>> env = {{"UCX_TLS", tls.tls},
                                                                {"UCX_NET_DEVICES", "lo"}};
  const unsigned cpus = std::thread::hardware_concurrency();
  const std::string server_cpu = cpus > 1 ? "1" : "0";
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string port = std::to_string(free_port());
    subprocess::options server_opts;
    server_opts.argv = {"ucx_perftest", "-p", port, "-c", server_cpu};
    server_opts.env = env;
    server_opts.merge_stderr = true;
    result<subprocess> server = subprocess::spawn(server_opts);
    if (!server) return server.err();
    // The server must listen before the client connects; a refused client is retried.
    std::this_thread::sleep_for(milliseconds(200 + 200 * attempt));
    subprocess::options client_opts;
    client_opts.argv = {"ucx_perftest", "127.0.0.1", "-p", port, "-c", "0", "-f"};
    client_opts.argv.insert(client_opts.argv.end(), test_args.begin(), test_args.end());
    if (tls.peer_errors) client_opts.argv.push_back("-e");
    client_opts.env = env;
    client_opts.merge_stderr = true;
    result<subprocess> client = subprocess::spawn(client_opts);
    if (!client) return client.err();
    result<std::string> output = client->read_all(milliseconds(120000));
    result<int> code = client->wait(milliseconds(5000));
    server->wait(milliseconds(5000));
    if (output && code && *code == 0) return parse_final_line(*output);
    if (code && *code == 127) {
      return error(errc::not_found,
                   "ucx_perftest could not be run; install Debian's ucx-utils "
                   "(scripts/install-deps.sh)");
    }
    last_error = output ? *output : output.err().message;
  }
  return error(errc::unavailable, "ucx_perftest failed (UCX_TLS=" + tls.tls + "):\n" + last_error);
}

std::vector<std::string> test(const std::string& name, std::size_t bytes, int count, int warmup) {
  return {"-t", name,
          "-s", std::to_string(bytes),
          "-n", std::to_string(count),
          "-w", std::to_string(warmup)};
}

}  // namespace

result<latency_figures> perftest_latency(const tls_case& tls, int warmup, int count) {
  result<perftest_line> median = run_once(tls, test("ucp_am_lat", 8, count, warmup));
  if (!median) return median.err();
  std::vector<std::string> p99_args = test("ucp_am_lat", 8, count, warmup);
  p99_args.insert(p99_args.end(), {"-R", "99"});
  result<perftest_line> p99 = run_once(tls, p99_args);
  if (!p99) return p99.err();
  return latency_figures{median->percentile_us, p99->percentile_us};
}

result<double> perftest_message_rate(const tls_case& tls, int warmup, int count) {
  result<perftest_line> rate = run_once(tls, test("ucp_am_bw", 8, count, warmup));
  if (!rate) return rate.err();
  return rate->message_rate_overall;
}

result<double> perftest_bandwidth(const tls_case& tls, std::size_t bytes, int count) {
  result<perftest_line> bw = run_once(tls, test("ucp_am_bw", bytes, count, 2));
  if (!bw) return bw.err();
  return bw->bandwidth_overall;
}

}  // namespace brigade::bench::transport_bench

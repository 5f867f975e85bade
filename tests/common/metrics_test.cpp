#include "common/metrics.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

using namespace brigade::metrics;

namespace {

// One line of the Prometheus text format 0.0.4: a comment, or name{labels} value.
bool valid_exposition_line(const std::string& line) {
  static const std::regex help(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex type(R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))");
  static const std::regex sample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? )"
      R"((NaN|[+-]Inf|[-+]?[0-9.]+(e[-+]?[0-9]+)?))");
  return std::regex_match(line, help) || std::regex_match(line, type) ||
         std::regex_match(line, sample);
}

}  // namespace

TEST_CASE("the exposition text follows the Prometheus format", "[metrics]") {
  registry r;
  r.add_counter("brigade_requests_total", "Requests.\nTwo lines \\ escaped.", {"code"})
      .with({"200"})
      .inc(3);
  r.add_counter("brigade_requests_total", "", {"code"}).with({"4\"0\\0\n"}).inc();
  r.add_gauge("brigade_running", "Running.").get().set(-2.5);
  auto& h = r.add_histogram("brigade_latency_seconds", "Latency.", {0.125, 1.0}).get();
  for (double v : {0.0625, 0.125, 0.5, 7.0})
    h.observe(v);
  const std::string text = r.prometheus_text();
  INFO(text);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    INFO("line: " << line);
    REQUIRE(valid_exposition_line(line));
  }
  REQUIRE(text.find("# HELP brigade_requests_total Requests.\\nTwo lines \\\\ escaped.\n") !=
          std::string::npos);
  REQUIRE(text.find("brigade_requests_total{code=\"200\"} 3\n") != std::string::npos);
  REQUIRE(text.find("brigade_requests_total{code=\"4\\\"0\\\\0\\n\"} 1\n") != std::string::npos);
  REQUIRE(text.find("brigade_running -2.5\n") != std::string::npos);
  // Buckets are cumulative and inclusive of their upper bound.
  REQUIRE(text.find("brigade_latency_seconds_bucket{le=\"0.125\"} 2\n") != std::string::npos);
  REQUIRE(text.find("brigade_latency_seconds_bucket{le=\"1\"} 3\n") != std::string::npos);
  REQUIRE(text.find("brigade_latency_seconds_bucket{le=\"+Inf\"} 4\n") != std::string::npos);
  REQUIRE(text.find("brigade_latency_seconds_sum 7.6875\n") != std::string::npos);
  REQUIRE(text.find("brigade_latency_seconds_count 4\n") != std::string::npos);
  // Each family is described once, before its samples.
  REQUIRE(text.find("# TYPE brigade_requests_total counter") ==
          text.rfind("# TYPE brigade_requests_total counter"));
}

TEST_CASE("registering a name again returns the same family; misuse is refused", "[metrics]") {
  registry r;
  auto& a = r.add_counter("brigade_x_total", "X.");
  auto& b = r.add_counter("brigade_x_total", "X.");
  REQUIRE(&a == &b);
  REQUIRE_THROWS_AS(r.add_gauge("brigade_x_total", "X."), std::logic_error);
  REQUIRE_THROWS_AS(r.add_counter("brigade_x_total", "X.", {"extra"}), std::logic_error);
  REQUIRE_THROWS_AS(r.add_counter("vllm_x_total", "No brigade_ prefix."), std::logic_error);
  REQUIRE_THROWS_AS(r.add_counter("brigade_bad-name", "Bad."), std::logic_error);
  REQUIRE_THROWS_AS(r.add_counter("brigade_y_total", "Y.", {"le"}), std::logic_error);
  REQUIRE_THROWS_AS(a.with({"unexpected"}), std::logic_error);
  REQUIRE_THROWS_AS(a.get().inc(-1), std::logic_error);
  REQUIRE_THROWS_AS(r.add_histogram("brigade_h", "H.", {1.0, 0.5}), std::logic_error);
}

TEST_CASE("concurrent updates are all counted", "[metrics]") {
  registry r;
  auto& c = r.add_counter("brigade_c_total", "C.", {"t"});
  auto& h = r.add_histogram("brigade_h_seconds", "H.", latency_buckets_s()).get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.with({std::to_string(t % 2)}).inc();
        h.observe(0.001 * (i % 100));
      }
    });
  }
  for (auto& t : threads)
    t.join();
  REQUIRE(c.with({"0"}).value() == 20000);
  REQUIRE(c.with({"1"}).value() == 20000);
  REQUIRE(h.read().count == 40000);
}

TEST_CASE("values print as Prometheus reads them", "[metrics]") {
  REQUIRE(format_value(42) == "42");
  REQUIRE(format_value(0.25) == "0.25");
  REQUIRE(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  REQUIRE(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  REQUIRE(format_value(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  REQUIRE(token_count_buckets(1000) ==
          std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000});
}

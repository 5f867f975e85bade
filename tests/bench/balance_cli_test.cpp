// Runs `brigade bench balance` the way a user does, briefly: its JSON, the step plot it draws
// and its errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_brigade.hpp"

using brigade::testing::count_of;
using brigade::testing::read_text;

namespace {

brigade::testing::brigade_run run_bench(const std::string& args) {
  return brigade::testing::run_brigade("bench balance " + args);
}

}  // namespace

TEST_CASE("bench balance times live migrations and draws every step it timed", "[bench][cli]") {
  const std::string svg = std::string(BRIGADE_BINARY_DIR) + "/bench_cli_test_steps.svg";
  std::remove(svg.c_str());
  const auto r = run_bench("--windows 20 --layers 2 --migrations 3 --json --steps-svg " + svg);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  const auto& m = doc.at("migration");
  CHECK(m.at("migrations").get<int>() == 3);
  CHECK(m.at("move_fraction").get<double>() == 0.2);
  const int during = m.at("steps_during").get<int>();
  const int outside = m.at("steps_outside").get<int>();
  CHECK(during > 0);
  CHECK(outside > 0);
  CHECK(m.at("median_step_ms").get<double>() > 0);
  CHECK(m.at("fixed_loop_p99_over_median").get<double>() >= 1);
  const auto& goal = doc.at("goals").back();
  CHECK(goal.at("goal") == "p99 step time during migration / local median");
  CHECK(goal.at("value").get<double>() == m.at("local_p99_during").get<double>());
  CHECK(m.at("local_p99_during_over_local_p99_outside").get<double>() ==
        Approx(m.at("local_p99_during").get<double>() / m.at("local_p99_outside").get<double>()));
  CHECK(m.at("local_median_during_over_control").get<double>() ==
        Approx(m.at("local_median_during").get<double>() /
               m.at("local_median_control").get<double>()));
  // A cycle per migration, and one before the first where steps were timed before it.
  const int cycles = m.at("bootstrap_cycles").get<int>();
  CHECK((cycles == 3 || cycles == 4));
  for (const char* key :
       {"local_p99_share_interval_95", "local_median_share_interval_95",
        "local_median_over_control_interval_95", "local_p99_over_control_interval_95"}) {
    INFO(key);
    const auto& interval = m.at(key);
    if (interval.is_null()) continue;  // three migrations may not bound it
    REQUIRE(interval.size() == 2);
    CHECK(interval[0].get<double>() > 0);
    CHECK(interval[0].get<double>() <= interval[1].get<double>());
  }
  // Every timed step falls in exactly one phase: those of a migration are the steps during it.
  const auto& phases = m.at("phases");
  int in_phases = 0;
  for (const auto& [name, p] : phases.items())
    in_phases += p.at("steps").get<int>();
  CHECK(in_phases == during + outside);
  CHECK(phases.at("start").at("steps").get<int>() + phases.at("within").at("steps").get<int>() +
            phases.at("switch").at("steps").get<int>() +
            phases.at("whole").at("steps").get<int>() ==
        during);
  CHECK(phases.at("after").at("steps").get<int>() == 3);
  // The plot holds exactly the steps the figures count, marked alike.
  const std::string drawn = read_text(svg);
  CHECK(count_of(drawn, "<circle class=\"step") == static_cast<size_t>(during + outside));
  CHECK(count_of(drawn, "<circle class=\"step during\"") == static_cast<size_t>(during));
  CHECK(count_of(drawn, "<rect class=\"migration\"") == 3);
}

TEST_CASE("bench balance keeps every migration window past the supervisor's last 256 events",
          "[bench][cli]") {
  // Two events a migration: a bench that read the events once, at the end, lost the windows of
  // all but the last 128 migrations and counted their steps as outside.
  const std::string svg = std::string(BRIGADE_BINARY_DIR) + "/bench_cli_test_many.svg";
  const auto r = run_bench("--windows 20 --layers 2 --migrations 130 --json --steps-svg " + svg);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto m = nlohmann::json::parse(r.out).at("migration");
  REQUIRE(m.at("migrations").get<int>() == 130);
  CHECK(count_of(read_text(svg), "<rect class=\"migration\"") == 130);
  CHECK(m.at("bootstrap_cycles").get<int>() >= 130);
}

TEST_CASE("bench balance times migrations across two node processes on the transport asked for",
          "[bench][cli]") {
  const auto r = run_bench(
      "--windows 20 --layers 2 --migrations 3 --migration-nodes --migration-tls "
      "posix,sysv,cma,self --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto m = nlohmann::json::parse(r.out).at("migration");
  CHECK(m.at("two_nodes").get<bool>());
  CHECK(m.at("transport_tls") == "posix,sysv,cma,self");
  CHECK(m.at("migrations").get<int>() == 3);
  CHECK(m.at("steps_during").get<int>() > 0);
  // In one process there is no data plane to name.
  const auto one = run_bench("--windows 20 --layers 2 --migrations 1 --json");
  REQUIRE(one.exit_code == 0);
  CHECK(nlohmann::json::parse(one.out).at("migration").at("transport_tls").is_null());
}

TEST_CASE("bench balance refuses a step plot it cannot draw, before timing anything",
          "[bench][cli]") {
  const auto without = run_bench("--migrations 0 --steps-svg /tmp/never.svg");
  CHECK(without.exit_code == 2);
  CHECK(without.err.find("--steps-svg needs --migrations above 0") != std::string::npos);
  const auto too_many = run_bench("--move-fraction 1.5");
  CHECK(too_many.exit_code != 0);  // a usage error, with CLI11's exit code
  CHECK(too_many.err.find("--move-fraction") != std::string::npos);
  const auto tls_alone = run_bench("--migration-tls posix,sysv,cma,self");
  CHECK(tls_alone.exit_code != 0);  // the data plane's transport needs the nodes
  CHECK(tls_alone.err.find("--migration-tls requires --migration-nodes") != std::string::npos);
  const std::string bad = "/nonexistent-brigade-dir/steps.svg";
  const auto unwritable = run_bench("--windows 20 --layers 2 --steps-svg " + bad);
  CHECK(unwritable.exit_code == 1);
  CHECK(unwritable.err.find("cannot write --steps-svg " + bad) != std::string::npos);
  CHECK(unwritable.err.find("No such file or directory") != std::string::npos);
  CHECK(unwritable.err.find("timing decode steps") == std::string::npos);
}

// Runs `brigade bench balance` the way a user does, briefly: its JSON, the step plot it draws
// and its errors.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct run_result {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

run_result run_bench(const std::string& args) {
  // One file per run: ctest runs the test cases as processes of their own, side by side.
  static int runs = 0;
  const std::string err_path = std::string(BRIGADE_BINARY_DIR) + "/bench_cli_test." +
                               std::to_string(::getpid()) + "." + std::to_string(++runs) +
                               ".stderr";
  const std::string command =
      std::string(BRIGADE_BINARY_DIR) + "/brigade bench balance " + args + " 2>" + err_path;
  run_result r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0)
    r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_text(err_path);
  std::remove(err_path.c_str());
  return r;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("bench balance times live migrations and draws every step it timed", "[bench][cli]") {
  const std::string svg = std::string(BRIGADE_BINARY_DIR) + "/bench_cli_test_steps.svg";
  std::remove(svg.c_str());
  const run_result r =
      run_bench("--windows 20 --layers 2 --migrations 3 --json --steps-svg " + svg);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  const auto& m = doc.at("migration");
  CHECK(m.at("migrations").get<int>() == 3);
  const int during = m.at("steps_during").get<int>();
  const int outside = m.at("steps_outside").get<int>();
  CHECK(during > 0);
  CHECK(outside > 0);
  CHECK(m.at("median_step_ms").get<double>() > 0);
  CHECK(m.at("fixed_loop_p99_over_median").get<double>() >= 1);
  const auto& goal = doc.at("goals").back();
  CHECK(goal.at("goal") == "p99 step time during migration / local median");
  CHECK(goal.at("value").get<double>() == m.at("local_p99_during").get<double>());
  // The plot holds exactly the steps the figures count, marked alike.
  const std::string drawn = read_text(svg);
  CHECK(count_of(drawn, "<circle class=\"step") == static_cast<size_t>(during + outside));
  CHECK(count_of(drawn, "<circle class=\"step during\"") == static_cast<size_t>(during));
  CHECK(count_of(drawn, "<rect class=\"migration\"") == 3);
}

TEST_CASE("bench balance refuses a step plot it cannot draw, before timing anything",
          "[bench][cli]") {
  const run_result without = run_bench("--migrations 0 --steps-svg /tmp/never.svg");
  CHECK(without.exit_code == 2);
  CHECK(without.err.find("--steps-svg needs --migrations above 0") != std::string::npos);
  const std::string bad = "/nonexistent-brigade-dir/steps.svg";
  const run_result unwritable = run_bench("--windows 20 --layers 2 --steps-svg " + bad);
  CHECK(unwritable.exit_code == 1);
  CHECK(unwritable.err.find("cannot write --steps-svg " + bad) != std::string::npos);
  CHECK(unwritable.err.find("No such file or directory") != std::string::npos);
  CHECK(unwritable.err.find("timing decode steps") == std::string::npos);
}

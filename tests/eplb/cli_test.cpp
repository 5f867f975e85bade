// Runs the brigade binary the way a user does and checks its answers and its errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/eplb/random_loads.hpp"
#include "tests/support/run_brigade.hpp"

namespace {

using brigade::testing::run_brigade;

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(BRIGADE_BINARY_DIR) + "/eplb_cli_test_" + name;
  std::ofstream(path) << text;
  return path;
}

std::string load_json(int layers, int experts, uint64_t seed) {
  nlohmann::json doc;
  doc["load"] = brigade::eplb::testing::random_loads(
      layers, experts, brigade::eplb::testing::load_family::zipf, seed);
  return doc.dump();
}

void require_error(const std::string& args, const std::string& fragment) {
  const auto r = run_brigade("plan-experts " + args);
  INFO("brigade plan-experts " << args << "\n" << r.all());
  CHECK(r.exit_code != 0);
  CHECK(r.all().find(fragment) != std::string::npos);
}

}  // namespace

TEST_CASE("plan-experts prints a layout and its figures as JSON", "[eplb][cli]") {
  const std::string load = write_file("load.json", load_json(3, 16, 1));
  const auto r =
      run_brigade("plan-experts --load " + load + " --shards 4 --slots-per-shard 5 --json");
  INFO(r.all());
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc["phy2log"].size() == 3);
  CHECK(doc["phy2log"][0].size() == 20);
  for (const char* key : {"balancedness", "max_over_mean", "moved_slots", "plan_ms"}) {
    CHECK(doc.contains(key));
  }
  CHECK(doc["moved_slots"] == 0);
  CHECK(doc["balancedness"].get<double>() > 0.9);

  // Its output is a valid --current for the next plan; the same load moves nothing.
  const std::string current = write_file("current.json", r.out);
  const auto again = run_brigade("plan-experts --load " + load +
                                 " --shards 4 --slots-per-shard 5 --json --current " + current);
  INFO(again.all());
  REQUIRE(again.exit_code == 0);
  const auto next = nlohmann::json::parse(again.out);
  CHECK(next["moved_slots"] == 0);
  CHECK(next["phy2log"] == doc["phy2log"]);
}

TEST_CASE("plan-experts explains invalid input", "[eplb][cli]") {
  const std::string good = write_file("good.json", load_json(2, 8, 2));
  const std::string shape = " --shards 4 --slots-per-shard 3";
  require_error("--load /nonexistent/load.json" + shape, "cannot be opened");
  require_error("--load " + write_file("bad.json", "{\"load\": [[1, 2") + shape, "not valid JSON");
  require_error("--load " + write_file("noload.json", "{\"tokens\": []}") + shape,
                "no \"load\" array");
  require_error(
      "--load " + write_file("ragged.json", "{\"load\": [[1,2,3,4,5,6,7,8],[1,2]]}") + shape,
      "ragged");
  require_error("--load " + write_file("negative.json", "{\"load\": [[1,2,3,4,5,6,7,-8]]}") + shape,
                "non-negative");
  require_error("--load " + write_file("text.json", "{\"load\": [[1,2,\"x\",4,5,6,7,8]]}") + shape,
                "not a number");
  require_error("--load " + good + " --shards 2 --slots-per-shard 3", "cannot hold 8 experts");
  require_error("--load " + good + " --shards 2 --slots-per-shard 9", "exceed the 8 experts");
  require_error("--load " + good + shape + " --nodes 3", "do not divide");
  require_error("--load " + good + " --slots-per-shard 3", "--shards");
  require_error("--load " + good + shape + " --current /nonexistent/layout.json",
                "cannot be opened");
  const std::string wrong = write_file("wrong_layout.json", "{\"phy2log\": [[0, 1, 2]]}");
  require_error("--load " + good + shape + " --current " + wrong, "phy2log has 1 layers");
  const std::string short_row =
      write_file("short_layout.json", "{\"phy2log\": [[0, 1, 2], [0, 1, 2]]}");
  require_error("--load " + good + shape + " --current " + short_row, "has 3 slots");
}

TEST_CASE("bench balance compares the forecast planner with the last interval as JSON",
          "[eplb][cli]") {
  const auto r = run_brigade(
      "bench balance --forecast --json --layers 2 --windows 40 --seeds 1 --forecast-history 3");
  INFO(r.all());
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["benchmark"] == "balance_forecast");
  CHECK(doc["forecast"]["history_windows"] == 3);
  CHECK(doc["forecast"]["observes"] == "sample_window");
  CHECK(doc["forecast"]["trajectory_points"] == 2);
  // Two clusters by five loads: steady, sparse steady, slow, medium and fast drift.
  REQUIRE(doc["results"].size() == 10);
  for (const auto& row : doc["results"]) {
    for (const char* algorithm :
         {"deepseek-eplb", "planner", "planner+forecast", "planner+foresight"}) {
      const double b = row[algorithm]["layer_balancedness"].get<double>();
      CHECK(b > 0);
      CHECK(b <= 1);
    }
    CHECK(row["forecast_over_eplb"].get<double>() > 0);
  }
  CHECK(doc["goals"].size() == 3);
}

TEST_CASE("bench balance --forecast plans for interval sums as before on request", "[eplb][cli]") {
  const auto r = run_brigade(
      "bench balance --forecast --json --layers 2 --windows 40 --seeds 1 --forecast-per-interval "
      "--trajectory-points 0");
  INFO(r.all());
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["forecast"]["observes"] == "interval");
  CHECK(doc["forecast"]["trajectory_points"] == 0);
  REQUIRE(doc["results"].size() == 10);
}

TEST_CASE("bench balance refuses forecast options without --forecast", "[eplb][cli]") {
  const auto r = run_brigade("bench balance --hedge 2 --migrations 0");
  INFO(r.all());
  CHECK(r.exit_code != 0);
  CHECK(r.all().find("--forecast") != std::string::npos);
}

TEST_CASE("plan-experts keeps each expert group on one node with --groups", "[eplb][cli]") {
  const std::string load = write_file("grouped_load.json", load_json(3, 32, 3));
  const std::string shape = " --shards 8 --slots-per-shard 5 --nodes 4";
  const auto r = run_brigade("plan-experts --load " + load + shape + " --groups 8 --json");
  INFO(r.all());
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["expert_groups"] == 8);
  CHECK(doc["nodes"] == 4);
  CHECK(doc["groups_per_node"] == 2);
  REQUIRE(doc["group_node"].size() == 3);
  for (const auto& layer : doc["group_node"]) {
    std::vector<int> per_node(4, 0);
    for (int node : layer.get<std::vector<int>>()) {
      REQUIRE(node >= 0);
      ++per_node[static_cast<size_t>(node)];
    }
    CHECK(per_node == std::vector<int>(4, 2));
  }
  // Without --groups the JSON says so.
  const auto free = run_brigade("plan-experts --load " + load + shape + " --json");
  INFO(free.all());
  REQUIRE(free.exit_code == 0);
  CHECK(nlohmann::json::parse(free.out)["groups_per_node"].is_null());
  const auto summary = run_brigade("plan-experts --load " + load + shape + " --groups 8");
  CHECK(summary.out.find("groups per node                      2") != std::string::npos);
}

TEST_CASE("plan-experts refuses groups it cannot keep on nodes", "[eplb][cli]") {
  const std::string load = write_file("grouped_bad.json", load_json(1, 32, 4));
  const std::string shape = " --shards 8 --slots-per-shard 5";
  require_error("--load " + load + shape + " --groups 8", "more than one node");
  require_error("--load " + load + shape + " --nodes 4 --groups 6", "expert_groups (6)");
  require_error("--load " + load + shape + " --nodes 4 --groups 2", "divisible by nodes (4)");
  require_error("--load " + load + shape + " --nodes 4 --groups 0", "--groups");
}

TEST_CASE("bench balance --groups compares grouped and free placements as JSON", "[eplb][cli]") {
  const auto r = run_brigade(
      "bench balance --groups --json --group-layers 2 --group-tokens 2000 --group-seeds 1");
  INFO(r.all());
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["benchmark"] == "balance_groups");
  // Two clusters by the planner and the baseline, each grouped and free.
  REQUIRE(doc["results"].size() == 8);
  for (const auto& row : doc["results"]) {
    INFO(row.dump());
    const double nodes = row["nodes_per_token"].get<double>();
    CHECK(nodes >= 1);
    if (row["groups_per_node"].get<bool>()) CHECK(nodes <= doc["topk_groups"].get<double>());
    CHECK(row["layer_max_over_mean"].get<double>() >= 1);
  }
  REQUIRE(doc["grouped_over_free"].size() == 4);
  for (const auto& ratio : doc["grouped_over_free"])
    CHECK(ratio["nodes_per_token"].get<double>() < 1);
}

TEST_CASE("bench balance refuses --groups with --forecast", "[eplb][cli]") {
  const auto r = run_brigade("bench balance --groups --forecast");
  INFO(r.all());
  CHECK(r.exit_code != 0);
  CHECK(r.all().find("ask for one") != std::string::npos);
}

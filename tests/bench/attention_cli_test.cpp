// Runs `brigade bench attention` the way a user does, briefly: rows for every context and KV type
// asked, contexts the model cannot hold named as skipped, and a missing model refused by name.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/support/run_brigade.hpp"

using brigade::testing::run_brigade;

namespace {

const std::string target = std::string(BRIGADE_SOURCE_DIR) + "/models/default/target";

}  // namespace

TEST_CASE("bench attention --json gives a row per context, batch and KV type", "[bench][cli]") {
  const auto r = run_brigade("bench attention --quick --json --model " + target +
                             " --contexts 40 300 100000 --batches 1 2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  std::set<std::string> seen;
  for (const auto& row : doc.at("rows")) {
    seen.insert(std::to_string(row.at("context").get<int>()) + "/" +
                std::to_string(row.at("batch").get<int>()) + "/" + row.at("kv").get<std::string>());
    CHECK(row.at("by_column_tokens_per_s").get<double>() > 0);
    CHECK(row.at("by_row_tokens_per_s").get<double>() > 0);
    CHECK(row.at("speedup").get<double>() > 0);
  }
  CHECK(seen == std::set<std::string>{"40/1/f32", "40/1/bf16", "40/2/f32", "40/2/bf16", "300/1/f32",
                                      "300/1/bf16", "300/2/f32", "300/2/bf16"});
  CHECK(doc.at("skipped_contexts") == nlohmann::json::array({100000}));
}

TEST_CASE("bench attention names a model directory it cannot load", "[bench][cli]") {
  const auto r = run_brigade("bench attention --quick --model /nonexistent/brigade-model");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("/nonexistent/brigade-model"));
}

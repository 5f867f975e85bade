// Runs `brigade bench speculation` the way a user does, briefly: its JSON and its errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/run_brigade.hpp"

TEST_CASE("bench speculation compares every configuration with plain decoding", "[bench][cli]") {
  const std::string work_dir = std::string(BRIGADE_BINARY_DIR) + "/bench_cli_work";
  const auto r = brigade::testing::run_brigade(
      "bench speculation --quick --json --batches 2 --drafts 3 --work-dir " + work_dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("same_tokens").get<bool>());
  // Three workloads, one batch, one draft length, adaptive and fixed windows.
  const auto& runs = doc.at("runs");
  REQUIRE(runs.size() == 6);
  for (const auto& run : runs) {
    INFO(run.dump());
    CHECK(run.at("batch") == 2);
    CHECK(run.at("max_draft") == 3);
    CHECK(run.at("same_tokens").get<bool>());
    CHECK(run.at("tokens_per_s").get<double>() > 0);
    CHECK(run.at("speed_over_plain").get<double>() > 0);
    CHECK(run.at("tokens_per_sequence_step").get<double>() >= 1.0);
  }
  const auto& steps = doc.at("verify_steps");
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].at("over_plain_step").get<double>() ==
        Approx(steps[0].at("verify_step_ms").get<double>() /
               steps[0].at("plain_step_ms").get<double>()));
}

TEST_CASE("bench speculation on the trained pair has a row per source and concurrency",
          "[bench][cli]") {
  const std::string pair = std::string(BRIGADE_SOURCE_DIR) + "/models/default";
  const auto r = brigade::testing::run_brigade(
      "bench speculation --quick --json --pair-only --concurrency 2 --gate 1 --pair " + pair);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  // The head it ran with, thresholds by batch and all: the committed one.
  std::ifstream committed(pair + "/draft/confidence_head.json");
  CHECK(doc.at("head") == nlohmann::json::parse(committed));
  // And the draft's attention window: its own, from the committed draft_settings.json.
  CHECK(doc.at("draft_attention_window") == 256);
  // The bounds' costs: three rounds before the single-stream rows, one before each of theirs.
  CHECK(doc.at("cost_rounds").get<int>() >= 4);
  CHECK(doc.at("draft_step_after_target_ms").get<double>() > 0);
  const auto& rows = doc.at("rows");
  std::vector<std::string> sources;
  for (const auto& row : rows) {
    INFO(row.dump());
    sources.push_back(row.at("source").get<std::string>() +
                      (row.at("gate") == "measured" ? "+gate" : "") + "@" +
                      std::to_string(row.at("concurrency").get<int>()));
    CHECK(row.at("same_tokens").get<bool>());
    CHECK(row.at("tokens_per_s").get<double>() > 0);
    CHECK(row.at("speedup").get<double>() > 0);
    // A fixed verify length's bound is at least plain decoding's by construction (length 0
    // is one of the lengths it picks from); the head's is its own measured tokens per verify
    // cost, which a slow verify step can put below 1, so only its sign is a property.
    if (row.at("source") == "draft_head") {
      CHECK(row.at("bound").get<double>() > 0);
    } else {
      CHECK(row.at("bound").get<double>() >= 1.0);
    }
    // Counting the draft model's forwards can only lower the bound; prompt lookup drafts free.
    CHECK(row.at("bound_with_drafts").get<double>() > 0);
    CHECK(row.at("bound_with_drafts").get<double>() <= row.at("bound").get<double>());
    if (row.at("source") == "lookup" || row.at("source") == "plain") {
      CHECK(row.at("bound_with_drafts").get<double>() == row.at("bound").get<double>());
    }
    if (row.at("source") == "draft_fixed") {
      CHECK(row.at("bound_with_drafts").get<double>() < row.at("bound").get<double>());
    }
    CHECK(row.at("verified_per_step").get<double>() >= 0);
    CHECK(row.at("drafted_per_step").get<double>() >= row.at("verified_per_step").get<double>());
    CHECK(row.at("acceptance").get<double>() >= 0);
  }
  // Each source measured by itself (the gate off).
  const std::vector<std::string> expected{"plain@1",          "lookup@1",     "draft_fixed@1",
                                          "draft_adaptive@1", "draft_head@1", "plain@2",
                                          "draft_head@2"};
  CHECK(sources == expected);
  CHECK(rows[0].at("speedup").get<double>() == Approx(1.0));
  CHECK(doc.at("calibration").size() > 0);
  // Beside the ungated concurrency row, the gated one: --gate 1 stops drafting at 2.
  const auto& gate = doc.at("gate");
  CHECK(gate.at("disable_above_batch") == 1);
  REQUIRE(gate.at("rows").size() == 1);
  const auto& gated = gate["rows"][0];
  INFO(gated.dump());
  CHECK(gated.at("concurrency") == 2);
  CHECK(gated.at("gate_stops_drafting").get<bool>());
  CHECK(gated.at("same_tokens").get<bool>());
  CHECK(gated.at("gated_tokens_per_s").get<double>() > 0);
  CHECK(gated.at("ungated_tokens_per_s").get<double>() == Approx(rows[6].at("tokens_per_s")));
  CHECK(gated.at("gated_speedup").get<double>() > 0);
  // The head as served, with the measured gate (model/speculation_gate.hpp): rows of its own.
  const auto& measured = doc.at("measured_gate").at("rows");
  REQUIRE(measured.size() == 2);
  CHECK(measured[0].at("source") == "draft_head");
  CHECK(measured[0].at("gate") == "measured");
  CHECK(measured[0].at("concurrency") == 1);
  CHECK(measured[0].at("same_tokens").get<bool>());
  CHECK(measured[1].at("concurrency") == 2);
  CHECK(gated.at("measured_tokens_per_s").get<double>() == Approx(measured[1].at("tokens_per_s")));
  CHECK(gated.at("measured_speedup").get<double>() > 0);
  // The sweep over batches (--quick: 1 and 2) and the crossover it measures.
  const auto& sweep = doc.at("sweep");
  REQUIRE(sweep.at("rows").size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& row = sweep["rows"][i];
    INFO(row.dump());
    CHECK(row.at("batch") == static_cast<int>(i) + 1);
    CHECK(row.at("same_tokens").get<bool>());
    CHECK(row.at("plain_tokens_per_s").get<double>() > 0);
    CHECK(row.at("ratio").get<double>() > 0);
    CHECK(row.at("lookup_ratio").get<double>() > 0);
    // With a head, the draft's fixed window beside it at every batch.
    CHECK(row.at("fixed_tokens_per_s").get<double>() > 0);
    CHECK(row.at("fixed_ratio").get<double>() > 0);
  }
  const int pays = sweep.at("pays_up_to_batch").get<int>();
  CHECK((pays == 0 || pays == 1 || pays == 2));
  CHECK(sweep.at("disable_above_batch") == 1);
  // Each row's untimed time to first token; the verify costs both ways.
  for (const auto& row : rows)
    CHECK(row.at("first_token_ms").get<double>() > 0);
  CHECK(doc.at("repeated_step_ms").size() == doc.at("verify_step_ms").size() + 1);
  // The same requests through the actor topology, as brigade serve runs them: plainly and with
  // the draft model, every answer plain decoding's, the draft's counts from the decode worker.
  const auto& served = doc.at("served").at("rows");
  REQUIRE(served.size() == 2);
  CHECK(served[0].at("mode") == "plain");
  CHECK(served[1].at("mode") == "draft_head");
  for (const auto& row : served) {
    INFO(row.dump());
    CHECK(row.at("requests") == 2);  // --quick: two prompts, one round
    CHECK(row.at("same_tokens").get<bool>());
    CHECK(row.at("tokens_per_s").get<double>() > 0);
    CHECK(row.at("end_to_end_tokens_per_s").get<double>() > 0);
    CHECK(row.at("first_token_ms").get<double>() > 0);
  }
  CHECK(served[0].at("speedup").get<double>() == Approx(1.0));
  CHECK(served[0].at("speculation").at("drafted_tokens") == 0);
  CHECK(served[1].at("speculation").at("drafted_tokens").get<int64_t>() > 0);
}

TEST_CASE("bench speculation refuses a draft length out of range", "[bench][cli]") {
  const auto r = brigade::testing::run_brigade("bench speculation --drafts 0");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err + r.out, Catch::Contains("--drafts"));
}

TEST_CASE("generate --json with a draft model reports its confidence head's calibration",
          "[bench][cli]") {
  const std::string pair = std::string(BRIGADE_SOURCE_DIR) + "/models/default";
  const auto r = brigade::testing::run_brigade(
      "generate --model " + pair + "/target --draft-model " + pair +
      "/draft --prompt 'The brigade of experts' --max-tokens 24 --temperature 0 --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto spec = nlohmann::json::parse(r.out).at("speculation");
  INFO(spec.dump());
  CHECK(spec.at("draft") == "model");
  // How the draft holds its weights: int8 where this CPU has AVX512-VNNI, else as stored; and
  // BRIGADE_DRAFT_INT8=0 holds it as stored anywhere.
  const std::string held = spec.at("draft_weights");
  CHECK((held == "int8" || held == "as_stored"));
  CHECK(spec.at("draft_attention_window") == 256);  // the draft's draft_settings.json
  ::setenv("BRIGADE_DRAFT_INT8", "0", 1);
  const auto stored = brigade::testing::run_brigade(
      "generate --model " + pair + "/target --draft-model " + pair +
      "/draft --prompt 'The brigade of experts' --max-tokens 4 --json");
  ::unsetenv("BRIGADE_DRAFT_INT8");
  REQUIRE(stored.exit_code == 0);
  CHECK(nlohmann::json::parse(stored.out).at("speculation").at("draft_weights") == "as_stored");
  const auto& buckets = spec.at("calibration");
  REQUIRE(buckets.size() == 10);
  CHECK(buckets[0].at("bucket") == "0.0-0.1");
  int64_t judged = 0, kept = 0;
  for (const auto& b : buckets) {
    CHECK(b.at("kept").get<int64_t>() <= b.at("drafts").get<int64_t>());
    judged += b.at("drafts").get<int64_t>();
    kept += b.at("kept").get<int64_t>();
  }
  // Every draft verification judged is in one bucket; the head kept drafting here.
  CHECK(judged > 0);
  CHECK(judged <= spec.at("drafted_tokens").get<int64_t>());
  CHECK(kept <= spec.at("accepted_tokens").get<int64_t>());
  CHECK(spec.at("proposed_tokens").get<int64_t>() >= spec.at("drafted_tokens").get<int64_t>());
}

TEST_CASE("bench speculation --tune-head writes the head with thresholds measured by batch",
          "[bench][cli]") {
  const std::string pair = std::string(BRIGADE_SOURCE_DIR) + "/models/default";
  const std::string out = std::string(BRIGADE_BINARY_DIR) + "/tuned_head.json";
  std::remove(out.c_str());
  const auto r = brigade::testing::run_brigade(
      "bench speculation --quick --json --pair-only --sweep-batches 4 1 --pair " + pair +
      " --tune-head " + out);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  const auto& tuning = doc.at("tuning");
  REQUIRE(tuning.size() == 2);
  CHECK(tuning[0].at("batch") == 1);  // batches in ascending order
  CHECK(tuning[1].at("batch") == 4);
  for (const auto& row : tuning) {
    INFO(row.dump());
    CHECK(row.at("speedup").size() == 9);
    for (const auto& [name, speedup] : row.at("speedup").items())
      CHECK(speedup.get<double>() > 0);
    CHECK(row.at("speedup").contains(row.at("chosen").get<std::string>()));
  }
  // The file: the committed head's weights, the first batch's thresholds at the top level and
  // from batch 1, and thresholds that never fall as the batch grows.
  std::ifstream in(out);
  REQUIRE(in);
  const auto head = nlohmann::json::parse(in);
  std::ifstream committed_in(pair + "/draft/confidence_head.json");
  const auto committed = nlohmann::json::parse(committed_in);
  CHECK(head.at("weights") == committed.at("weights"));
  CHECK(head == doc.at("head"));
  const auto& rules = head.at("by_batch");
  REQUIRE(!rules.empty());
  CHECK(rules[0].at("batch_from") == 1);
  CHECK(rules[0].at("threshold") == head.at("threshold"));
  for (size_t i = 1; i < rules.size(); ++i) {
    CHECK(rules[i].at("batch_from") == 4);
    CHECK(rules[i].at("threshold").get<double>() >= rules[i - 1].at("threshold").get<double>());
  }

  const auto none = brigade::testing::run_brigade(
      "bench speculation --quick --pair-only --confidence-head none --pair " + pair +
      " --tune-head " + out);
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.err, Catch::Contains("--tune-head needs the draft's confidence head"));
}

// Decode workers drafting with a draft model give the single-process engine's plain tokens, count
// acceptance per draft position and, with a confidence head, its calibration (in the statuses and
// in /metrics), and a draft model that cannot serve is refused by name: by the
// topology for its manifest field, by a node for the decode worker it would spawn.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/collecting_sink.hpp"
#include "actors/model_context.hpp"
#include "actors/spawn_checks.hpp"
#include "common/metrics.hpp"
#include "deploy/topology.hpp"
#include "kvcache/hash_key.hpp"
#include "model/engine.hpp"
#include "model/model_writer.hpp"
#include "support/derived_draft.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;

namespace {

// A MoE target whose first layer is dense, and a dense draft cut out of it (drafts often hold).
struct draft_fixture {
  testing::temp_dir dir{"draft-topology"};
  std::string target = dir.file("target");
  std::string draft = dir.file("draft");

  draft_fixture() {
    const model::model_spec spec = testing::target_with_dense_layer(21);
    REQUIRE(model::write_random_model(spec, target).ok());
    testing::write_derived_draft(spec, target, draft);
  }
};

std::vector<int32_t> prompt(int i) {
  std::vector<int32_t> p;
  for (int t = 0; t < 3 + (i * 7) % 40; ++t)
    p.push_back((i * 97 + t * 31) % 500);
  return p;
}

// Plain decoding in the single-process engine: the oracle speculation is held to.
std::vector<std::vector<int32_t>> plain_outputs(const std::string& dir, int n, int max_tokens,
                                                const model::sampling_params& sampling) {
  auto dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(dir, *dev, true);
  REQUIRE(loaded.ok());
  model::engine eng(*loaded.value(), *dev, {});
  model::request_options req;
  req.max_tokens = max_tokens;
  req.sampling = sampling;
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(eng.submit(prompt(i), req).value());
  eng.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids)
    out.push_back(eng.output(id));
  return out;
}

config::manifest drafting_manifest(const draft_fixture& f) {
  config::manifest m = config::default_manifest(f.target);
  m.experts.count = 4;
  m.decode.count = 2;
  m.decode.max_running = 8;
  m.decode.speculation.max_draft = model::default_model_drafts;
  m.decode.speculation.draft = model::draft_kind::model;
  m.decode.speculation.draft_model = f.draft;
  return m;
}

// Submits prompt(i) for i < n and checks each ends once, without error, with expected[i].
void check_generations(deploy::topology& topo, const std::vector<std::vector<int32_t>>& expected,
                       int max_tokens, const model::sampling_params& sampling) {
  std::vector<std::shared_ptr<testing::collecting_sink>> sinks;
  for (size_t i = 0; i < expected.size(); ++i) {
    serve::generation_request r;
    r.id = static_cast<int64_t>(i) + 1;
    r.prompt = prompt(static_cast<int>(i));
    r.max_tokens = max_tokens;
    r.sampling = sampling;
    sinks.push_back(std::make_shared<testing::collecting_sink>());
    REQUIRE(topo.service().submit(r, sinks.back()).ok());
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    INFO("prompt " << i);
    const bool done = sinks[i]->wait();
    if (!done) UNSCOPED_INFO("role statuses: " << topo.statuses_json());
    REQUIRE(done);
    CHECK_FALSE(sinks[i]->failed());
    CHECK(sinks[i]->tokens() == expected[i]);
  }
}

// The decode workers' speculation details, summed.
struct totals {
  int64_t drafted = 0;
  int64_t accepted = 0;
  std::vector<int64_t> drafted_at;
  std::vector<int64_t> accepted_at;
};

totals speculation_totals(deploy::topology& topo) {
  totals t;
  for (const auto& role : nlohmann::json::parse(topo.statuses_json())) {
    if (role["role"] != "decode") continue;
    const auto& s = role["detail"]["speculation"];
    CHECK(s["draft"] == "model");
    t.drafted += s["drafted_tokens"].get<int64_t>();
    t.accepted += s["accepted_tokens"].get<int64_t>();
    const auto drafted_at = s["drafted_by_position"].get<std::vector<int64_t>>();
    const auto accepted_at = s["accepted_by_position"].get<std::vector<int64_t>>();
    REQUIRE(drafted_at.size() == accepted_at.size());
    t.drafted_at.resize(std::max(t.drafted_at.size(), drafted_at.size()));
    t.accepted_at.resize(t.drafted_at.size());
    for (size_t i = 0; i < drafted_at.size(); ++i) {
      t.drafted_at[i] += drafted_at[i];
      t.accepted_at[i] += accepted_at[i];
    }
  }
  return t;
}

model::sampling_params sampled_params() {
  model::sampling_params s;
  s.temperature = 0.3f;
  s.top_k = 8;
  s.seed = 11;
  return s;
}

}  // namespace

TEST_CASE("decode workers drafting with a draft model give the engine's tokens (D=2)",
          "[topology][speculation][draft_model]") {
  draft_fixture f;
  const int n = 8, max_tokens = 32;
  for (const model::sampling_params& sampling : {model::sampling_params{}, sampled_params()}) {
    INFO("temperature " << sampling.temperature);
    const auto expected = plain_outputs(f.target, n, max_tokens, sampling);
    auto topo = deploy::topology::start(drafting_manifest(f));
    REQUIRE(topo.ok());
    check_generations(*topo.value(), expected, max_tokens, sampling);
    const totals t = speculation_totals(*topo.value());
    INFO("drafted " << t.drafted << ", accepted " << t.accepted);
    // The comparison proves something only if drafts were both kept and thrown away.
    CHECK(t.accepted > 0);
    CHECK(t.drafted > t.accepted);
    REQUIRE(t.drafted_at.size() == static_cast<size_t>(model::default_model_drafts));
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < t.drafted_at.size(); ++i) {
      drafted += t.drafted_at[i];
      accepted += t.accepted_at[i];
      CHECK(t.accepted_at[i] <= t.drafted_at[i]);
    }
    CHECK(drafted == t.drafted);
    CHECK(accepted == t.accepted);
    // /metrics carries the acceptance per position, summed over the workers.
    metrics::registry reg;
    topo.value()->service().collect_metrics(reg);
    const std::string text = reg.prometheus_text();
    CHECK_THAT(text, Catch::Contains(
                         "brigade_speculative_accepted_tokens_by_position_total{position=\"0\"} " +
                         std::to_string(t.accepted_at[0])));
    CHECK_THAT(text, Catch::Contains(
                         "brigade_speculative_draft_tokens_by_position_total{position=\"4\"} " +
                         std::to_string(t.drafted_at[4])));
  }
}

TEST_CASE("decode workers with a confidence head report its calibration in statuses and /metrics",
          "[topology][speculation][draft_model][calibration]") {
  draft_fixture f;
  // Predictions by draft index: 0.82, 0.62, 0.38, 0.18 (buckets 8, 6, 3, 1); cumulative 0.82,
  // 0.51, 0.19, 0.04, so the threshold cuts the fourth draft after the draft model computed it:
  // cut drafts must not count.
  std::ofstream(f.draft + "/confidence_head.json")
      << R"({"weights": {"bias": 1.5, "log_probability": 0, "probability": 0, "entropy": 0,
                         "index": -1}, "threshold": 0.1})";
  const int n = 8, max_tokens = 32;
  const auto expected = plain_outputs(f.target, n, max_tokens, {});
  // A draft attention window shorter than the contexts: the workers draft with it (plain
  // decoding's tokens all the same) and report it.
  config::manifest m = drafting_manifest(f);
  m.decode.speculation.draft_attention_window = 12;
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  check_generations(*topo.value(), expected, max_tokens, {});
  std::vector<int64_t> drafts(10, 0), kept(10, 0);
  int64_t verify_steps = 0, verified = 0, accepted = 0, proposed = 0;
  for (const auto& role : nlohmann::json::parse(topo.value()->statuses_json())) {
    if (role["role"] != "decode") continue;
    const auto& s = role["detail"]["speculation"];
    CHECK(s["draft_attention_window"] == 12);
    verify_steps += s["verify_steps"].get<int64_t>();
    verified += s["drafted_tokens"].get<int64_t>();
    accepted += s["accepted_tokens"].get<int64_t>();
    proposed += s["proposed_tokens"].get<int64_t>();
    const auto& buckets = s["calibration"];
    REQUIRE(buckets.size() == 10);
    for (size_t b = 0; b < 10; ++b) {
      INFO(buckets[b].dump());
      CHECK(buckets[b]["bucket"] ==
            model::confidence_calibration::bucket_name(static_cast<int>(b)));
      drafts[b] += buckets[b]["drafts"].get<int64_t>();
      kept[b] += buckets[b]["kept"].get<int64_t>();
      if (buckets[b]["drafts"].get<int64_t>() == 0) continue;
      // The mean prediction lies in its bucket; the observed rate is kept over drafts.
      CHECK(buckets[b]["mean_predicted"].get<double>() >= 0.1 * static_cast<double>(b) - 1e-9);
      CHECK(buckets[b]["mean_predicted"].get<double>() <= 0.1 * static_cast<double>(b + 1));
      CHECK(buckets[b]["observed"].get<double>() ==
            Approx(static_cast<double>(buckets[b]["kept"].get<int64_t>()) /
                   static_cast<double>(buckets[b]["drafts"].get<int64_t>())));
    }
  }
  int64_t observed = 0, observed_kept = 0, used = 0;
  for (size_t b = 0; b < 10; ++b) {
    observed += drafts[b];
    observed_kept += kept[b];
    used += drafts[b] > 0 ? 1 : 0;
  }
  INFO("verify steps " << verify_steps << ", verified " << verified << ", accepted " << accepted
                       << ", proposed " << proposed << ", calibrated " << observed);
  // Not vacuous: drafts kept and rejected, some cut by the head, predictions in 2+ buckets.
  CHECK(accepted > 0);
  CHECK(verified > accepted);
  CHECK(proposed > verified);
  CHECK(used >= 2);
  // Each verify step judged its drafts up to the first rejection: every kept draft, at most one
  // rejected draft per step; drafts after a rejection and drafts the head cut are not counted.
  CHECK(observed_kept == accepted);
  CHECK(observed >= verify_steps);
  CHECK(observed - observed_kept <= verify_steps);
  CHECK(observed <= verified);
  // /metrics carries the same buckets, summed over the workers.
  metrics::registry reg;
  topo.value()->service().collect_metrics(reg);
  const std::string text = reg.prometheus_text();
  CHECK_THAT(text, Catch::Contains("brigade_speculative_proposed_tokens_total " +
                                   std::to_string(proposed)));
  for (size_t b = 0; b < 10; ++b) {
    if (drafts[b] == 0) continue;
    const std::string label =
        "{bucket=\"" + model::confidence_calibration::bucket_name(static_cast<int>(b)) + "\"} ";
    CHECK_THAT(text, Catch::Contains("brigade_speculative_calibration_drafts_total" + label +
                                     std::to_string(drafts[b])));
    CHECK_THAT(text, Catch::Contains("brigade_speculative_calibration_kept_total" + label +
                                     std::to_string(kept[b])));
    CHECK_THAT(text, Catch::Contains("brigade_speculative_calibration_predicted_total" + label));
  }
}

TEST_CASE("the topology refuses a draft model it cannot use, naming the manifest field",
          "[topology][speculation][draft_model]") {
  draft_fixture f;
  config::manifest m = drafting_manifest(f);
  m.decode.speculation.draft_model = f.dir.file("nowhere");
  auto missing = deploy::topology::start(m);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.err().message, Catch::Contains("'roles.decode.speculation.draft_model'") &&
                                        Catch::Contains(f.dir.file("nowhere")) &&
                                        Catch::Contains("does not exist"));

  model::model_spec other = testing::small_model_spec(5, "qwen3");
  other.vocab = 384;
  REQUIRE(model::write_random_model(other, f.dir.file("other-vocab")).ok());
  m.decode.speculation.draft_model = f.dir.file("other-vocab");
  auto mismatch = deploy::topology::start(m);
  REQUIRE_FALSE(mismatch.ok());
  CHECK_THAT(mismatch.err().message, Catch::Contains("'roles.decode.speculation.draft_model'") &&
                                         Catch::Contains("384") && Catch::Contains("512"));
}

TEST_CASE("a node refuses a decode worker whose draft model it lacks", "[spawn][draft_model]") {
  draft_fixture f;
  auto ctx = actors::model_context::load(f.target, kvcache::random_hash_key(), {});
  REQUIRE(ctx.ok());
  actors::decode_worker_config config;
  config.name = "decode-3";
  config.speculation = drafting_manifest(f).decode.speculation;
  CHECK(actors::check_draft(*ctx.value(), config).ok());
  // Asked again, the node shares what it loaded.
  CHECK(ctx.value()->draft(f.draft).value() == ctx.value()->draft(f.draft).value());
  config.speculation.draft_model = f.dir.file("not-on-this-node");
  const status refused = actors::check_draft(*ctx.value(), config);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.err().message, Catch::StartsWith("cannot spawn decode-3: ") &&
                                        Catch::Contains("speculation.draft_model") &&
                                        Catch::Contains("does not exist"));
  config.speculation.draft_model.clear();
  CHECK_THAT(actors::check_draft(*ctx.value(), config).err().message,
             Catch::Contains("speculation.draft_model is empty"));
}

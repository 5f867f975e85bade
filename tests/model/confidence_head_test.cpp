// The confidence head: its prediction and cut-off by hand, its calibration buckets from a known
// stream of verify steps, its JSON with errors naming the field, and the engine drafting with the
// committed pair and its head still giving plain decoding's tokens and a calibration that counts
// only verified drafts.
#include "model/confidence_head.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "model/draft_model.hpp"
#include "model/engine.hpp"

using namespace brigade;
using namespace brigade::model;

namespace {

draft_feature feature(float probability, float entropy, int32_t index) {
  draft_feature f;
  f.probability = probability;
  f.entropy = entropy;
  f.index = index;
  return f;
}

std::string error_of(const std::string& text) {
  auto h = confidence_head::parse(text, "head.json");
  REQUIRE_FALSE(h.ok());
  return h.err().message;
}

}  // namespace

TEST_CASE("a confidence head predicts by hand and cuts at the cumulative threshold",
          "[confidence_head]") {
  confidence_head h;
  h.bias = 0.5;
  h.log_probability = 2.0;
  h.probability = 0.0;
  h.entropy = -1.0;
  h.index = -0.25;
  h.threshold = 0.3;
  // z = 0.5 + 2 log(0.5) - 1 * 0.4 - 0.25 * 1 = -1.536294...; sigmoid(z) = 0.177085...
  CHECK(h.predict(feature(0.5f, 0.4f, 1)) == Approx(1.0 / (1.0 + std::exp(1.5362944))));
  // z = 0.5 for a certain draft at index 0: 0.622459.
  CHECK(h.predict(feature(1.0f, 0.0f, 0)) == Approx(0.6224593));
  // Products: 0.6225, then 0.6225 * sigmoid(0.25) = 0.6225 * 0.5622 = 0.3499, then
  // 0.3499 * sigmoid(0) = 0.175 < 0.3: two drafts are verified.
  const std::vector<draft_feature> drafts{feature(1.0f, 0.0f, 0), feature(1.0f, 0.0f, 1),
                                          feature(1.0f, 0.0f, 2), feature(1.0f, 0.0f, 3)};
  CHECK(h.keep(drafts) == 2);
  h.threshold = 0.0;
  CHECK(h.keep(drafts) == 4);
  h.threshold = 0.7;
  CHECK(h.keep(drafts) == 0);
  // z = 0.5 + 2 log(0.5) + 3 * 0.5 - 1 * 0.4 - 0.25 * 1 = -0.036294...
  h.probability = 3.0;
  CHECK(h.predict(feature(0.5f, 0.4f, 1)) == Approx(1.0 / (1.0 + std::exp(0.0362944))));
  // A probability of 0 is clamped rather than giving log(0).
  CHECK(std::isfinite(h.predict(feature(0.0f, 1.0f, 0))));
}

TEST_CASE("calibration counts each verified draft in its prediction's bucket, and no other",
          "[confidence_head][calibration]") {
  // Predictions by index alone: 0.5, sigmoid(-1) = 0.269, sigmoid(-2) = 0.119, sigmoid(-3) =
  // 0.047, in buckets 5, 2, 1 and 0.
  confidence_head h;
  h.index = -1.0;
  const std::vector<draft_feature> four{feature(0.3f, 1.0f, 0), feature(0.3f, 1.0f, 1),
                                        feature(0.3f, 1.0f, 2), feature(0.3f, 1.0f, 3)};
  confidence_calibration c;
  h.calibrate(four, 4, c);  // every draft kept: four outcomes, all kept
  h.calibrate(four, 1, c);  // draft 0 kept, draft 1 rejected; 2 and 3 were never compared
  h.calibrate({four[0], four[1], four[2]}, 0, c);  // draft 0 rejected; the rest never compared
  h.calibrate({}, 0, c);                           // the head cut every draft: nothing was verified
  const std::vector<int64_t> drafts{1, 1, 2, 0, 0, 3, 0, 0, 0, 0};
  const std::vector<int64_t> kept{1, 1, 1, 0, 0, 2, 0, 0, 0, 0};
  CHECK(c.drafts == drafts);
  CHECK(c.kept == kept);
  CHECK(c.total() == 7);
  CHECK(c.predicted[5] == Approx(3 * 0.5));
  CHECK(c.predicted[2] == Approx(2 / (1 + std::exp(1.0))));
  CHECK(c.predicted[1] == Approx(1 / (1 + std::exp(2.0))));
  CHECK(c.predicted[0] == Approx(1 / (1 + std::exp(3.0))));
  // Bucket edges: [b/10, (b+1)/10), with 1.0 in the last; names as the metrics label them.
  CHECK(confidence_calibration::bucket_of(0.0) == 0);
  CHECK(confidence_calibration::bucket_of(0.1) == 1);
  CHECK(confidence_calibration::bucket_of(0.99) == 9);
  CHECK(confidence_calibration::bucket_of(1.0) == 9);
  CHECK(confidence_calibration::bucket_name(0) == "0.0-0.1");
  CHECK(confidence_calibration::bucket_name(9) == "0.9-1.0");
  // Decoders' buckets add, also inside speculation_stats.
  speculation_stats a, b;
  a.calibration = c;
  b.calibration = c;
  a.merge(b);
  CHECK(a.calibration.total() == 14);
  CHECK(a.calibration.kept[5] == 4);
  CHECK(a.calibration.predicted[5] == Approx(3.0));
}

TEST_CASE("a confidence head's JSON loads, and a bad one is refused naming the field",
          "[confidence_head]") {
  auto h = confidence_head::parse(
      R"({"weights": {"bias": 0.1, "log_probability": 1.5, "probability": 2.5, "entropy": -0.2,
                      "index": -0.3}, "threshold": 0.35})",
      "head.json");
  REQUIRE(h.ok());
  CHECK(h->bias == 0.1);
  CHECK(h->log_probability == 1.5);
  CHECK(h->probability == 2.5);
  CHECK(h->entropy == -0.2);
  CHECK(h->index == -0.3);
  CHECK(h->threshold == 0.35);
  CHECK(h->continue_threshold == 0.0);  // optional: the draft goes on while drafts are verified
  auto with_continue = confidence_head::parse(
      R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0, "entropy": 0,
                      "index": 0}, "threshold": 0.4, "continue_threshold": 0.8})",
      "head.json");
  REQUIRE(with_continue.ok());
  CHECK(with_continue->continue_threshold == 0.8);
  CHECK(with_continue->drafts_on(0.8));
  CHECK_FALSE(with_continue->drafts_on(0.79));

  CHECK_THAT(error_of("[1, 2]"), Catch::Contains("head.json: not a JSON object"));
  CHECK_THAT(error_of(R"({"threshold": 0.3})"), Catch::Contains("'weights'"));
  CHECK_THAT(error_of(R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0,
                          "index": 0}, "threshold": 0.3})"),
             Catch::Contains("weights: missing field 'entropy'"));
  CHECK_THAT(error_of(R"({"weights": {"bias": "x", "log_probability": 1, "probability": 0,
                          "entropy": 0, "index": 0}, "threshold": 0.3})"),
             Catch::Contains("field 'bias' is not a finite number"));
  CHECK_THAT(error_of(R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0,
                          "entropy": 0, "index": 0}})"),
             Catch::Contains("missing field 'threshold'"));
  CHECK_THAT(error_of(R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0,
                          "entropy": 0, "index": 0}, "threshold": 1.5})"),
             Catch::Contains("'threshold' must lie in [0, 1]"));
  CHECK_THAT(error_of(R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0,
                          "entropy": 0, "index": 0}, "threshold": 0.3, "continue_threshold": 2})"),
             Catch::Contains("'continue_threshold' must lie in [0, 1]"));
  CHECK_THAT(error_of(R"({"weights": {"bias": 0, "log_probability": 1, "probability": 0,
                          "entropy": 0, "index": 0}, "threshold": 0.3, "continue_threshold": "x"})"),
             Catch::Contains("field 'continue_threshold' is not a finite number"));
  auto missing = confidence_head::load("/nonexistent/confidence_head.json");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.err().message, Catch::Contains("/nonexistent/confidence_head.json"));
  // "none" and a draft directory without a head give none; a bad explicit path is an error.
  auto none = confidence_head::for_draft("/nonexistent", "none");
  REQUIRE(none.ok());
  CHECK(none.value() == nullptr);
  auto absent = confidence_head::for_draft("/nonexistent", "");
  REQUIRE(absent.ok());
  CHECK(absent.value() == nullptr);
  CHECK_FALSE(confidence_head::for_draft("/nonexistent", "/nonexistent/x.json").ok());
}

namespace {

const std::string pair_dir = std::string(BRIGADE_SOURCE_DIR) + "/models/default";

std::vector<std::vector<int32_t>> outputs(const loaded_model& target, gpu::backend& dev,
                                          const engine_options& options,
                                          const request_options& request,
                                          speculation_stats* stats = nullptr) {
  engine eng(target, dev, options);
  std::vector<int64_t> ids;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 12 + 7 * p; ++i)
      prompt.push_back(static_cast<int32_t>((p * 389 + i * 61) % 4000 + 20));
    ids.push_back(eng.submit(prompt, request).value());
  }
  eng.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (int64_t id : ids)
    out.push_back(eng.output(id));
  if (stats) *stats = eng.speculation();
  return out;
}

// The committed pair loaded on the CPU, with the draft directory's head.
struct committed_pair {
  std::unique_ptr<gpu::backend> dev = gpu::make_cpu_backend();
  std::unique_ptr<loaded_model> target;
  std::shared_ptr<const loaded_model> draft;
  std::shared_ptr<const confidence_head> head;

  committed_pair() {
    auto t = loaded_model::load(pair_dir + "/target", *dev, true);
    REQUIRE(t.ok());
    target = std::move(t.value());
    auto d = draft_model::load(pair_dir + "/draft", target->config, pair_dir + "/target", *dev);
    REQUIRE(d.ok());
    draft = d.value();
    auto h = confidence_head::for_draft(pair_dir + "/draft", "");
    REQUIRE(h.ok());
    REQUIRE(h.value() != nullptr);
    head = h.value();
  }

  // Engine options drafting with the pair's draft and `with` as its head.
  engine_options drafting(std::shared_ptr<const confidence_head> with) const {
    engine_options o;
    o.speculation.max_draft = default_model_drafts;
    o.speculation.draft = draft_kind::model;
    o.draft_weights = draft;
    o.confidence_head = std::move(with);
    return o;
  }
};

}  // namespace

TEST_CASE("the committed pair drafting with its confidence head gives plain decoding's tokens",
          "[confidence_head][default_model]") {
  const committed_pair pair;
  const engine_options drafting = pair.drafting(pair.head);
  for (const bool sampled : {false, true}) {
    INFO((sampled ? "sampled, seed 7" : "greedy"));
    request_options request;
    request.max_tokens = 40;
    if (sampled) {
      request.sampling.temperature = 0.7f;
      request.sampling.top_k = 20;
      request.sampling.seed = 7;
    }
    speculation_stats stats;
    const auto plain = outputs(*pair.target, *pair.dev, engine_options{}, request);
    const auto spec = outputs(*pair.target, *pair.dev, drafting, request, &stats);
    CHECK(spec == plain);
    // Not vacuous: the head let drafts through, and the target both kept and rejected some.
    CHECK(stats.drafted_tokens > 0);
    CHECK(stats.accepted_tokens > 0);
    CHECK(stats.accepted_tokens < stats.drafted_tokens);
    // Calibration saw each verified draft up to the first rejection of its step: every kept
    // draft, at most one rejected draft per verify step, and no draft the target did not judge.
    const confidence_calibration& c = stats.calibration;
    int64_t kept = 0;
    for (int64_t k : c.kept)
      kept += k;
    CHECK(kept == stats.accepted_tokens);
    CHECK(c.total() >= stats.verify_steps);
    CHECK(c.total() - kept <= stats.verify_steps);
    CHECK(c.total() <= stats.drafted_tokens);
    CHECK(stats.proposed_tokens >= stats.drafted_tokens);
  }
}

TEST_CASE("a confidence head's thresholds follow the batch, and its JSON carries them",
          "[confidence_head]") {
  auto h = confidence_head::parse(
      R"({"weights": {"bias": 0, "log_probability": 0, "probability": 0, "entropy": 0,
                      "index": 0}, "threshold": 0.6, "continue_threshold": 0.7,
          "by_batch": [{"batch_from": 2, "threshold": 0.1, "continue_threshold": 0.2},
                       {"batch_from": 8, "threshold": 0.45}]})",
      "head.json");
  REQUIRE(h.ok());
  REQUIRE(h->by_batch.size() == 2);
  // Batch 1 is below the first entry: the top-level thresholds.
  CHECK(h->rule(1).threshold == 0.6);
  CHECK(h->rule(1).continue_threshold == 0.7);
  CHECK(h->rule(2).threshold == 0.1);
  CHECK(h->rule(7).continue_threshold == 0.2);
  CHECK(h->rule(8).threshold == 0.45);
  CHECK(h->rule(8).continue_threshold == 0.0);  // optional in an entry too
  CHECK(h->rule(1000).threshold == 0.45);
  // Every draft predicts sigmoid(0) = 0.5: products 0.5, 0.25, 0.125.
  const std::vector<draft_feature> drafts{feature(0.5f, 1.0f, 0), feature(0.5f, 1.0f, 1),
                                          feature(0.5f, 1.0f, 2)};
  CHECK(h->keep(drafts, 1) == 0);
  CHECK(h->keep(drafts, 4) == 3);
  CHECK(h->keep(drafts, 8) == 1);
  CHECK(h->drafts_on(0.3, 4));
  CHECK_FALSE(h->drafts_on(0.3, 1));

  // Written and read back: the same head.
  auto again = confidence_head::parse(h->to_json(), "again.json");
  REQUIRE(again.ok());
  CHECK(again->threshold == h->threshold);
  CHECK(again->continue_threshold == h->continue_threshold);
  REQUIRE(again->by_batch.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(again->by_batch[i].batch_from == h->by_batch[i].batch_from);
    CHECK(again->by_batch[i].threshold == h->by_batch[i].threshold);
    CHECK(again->by_batch[i].continue_threshold == h->by_batch[i].continue_threshold);
  }

  const std::string weights =
      R"("weights": {"bias": 0, "log_probability": 0, "probability": 0, "entropy": 0, "index": 0},
         "threshold": 0.5, )";
  CHECK_THAT(error_of("{" + weights + R"("by_batch": {"batch_from": 2}})"),
             Catch::Contains("field 'by_batch' is not an array"));
  CHECK_THAT(error_of("{" + weights + R"("by_batch": [3]})"),
             Catch::Contains("by_batch[0]: not an object"));
  CHECK_THAT(error_of("{" + weights + R"("by_batch": [{"batch_from": 0, "threshold": 0.1}]})"),
             Catch::Contains("by_batch[0]: field 'batch_from' must be a whole number from 1"));
  CHECK_THAT(error_of("{" + weights + R"("by_batch": [{"batch_from": 2.5, "threshold": 0.1}]})"),
             Catch::Contains("'batch_from' must be a whole number"));
  CHECK_THAT(error_of("{" + weights +
                      R"("by_batch": [{"batch_from": 4, "threshold": 0.1},
                                      {"batch_from": 4, "threshold": 0.2}]})"),
             Catch::Contains("by_batch[1]: batch_from 4 must be above the previous entry's 4"));
  CHECK_THAT(error_of("{" + weights + R"("by_batch": [{"batch_from": 2}]})"),
             Catch::Contains("by_batch[0]: missing field 'threshold'"));
  CHECK_THAT(error_of("{" + weights +
                      R"("by_batch": [{"batch_from": 2, "threshold": 0.1,
                                       "continue_threshold": -1}]})"),
             Catch::Contains("by_batch[0]: field 'continue_threshold' must lie in [0, 1]"));
}

TEST_CASE("the draft model cuts with the head's thresholds for the step's batch",
          "[confidence_head][default_model]") {
  const committed_pair pair;
  // Alone a sequence verifies nothing (every product is below 1) and would stop drafting after
  // one draft; from two sequences drafting together, every draft, and drafting goes on.
  auto head = std::make_shared<confidence_head>(*pair.head);
  head->threshold = 1.0;
  head->continue_threshold = 1.0;
  head->by_batch = {{2, 0.0, 0.0}};
  const engine_options drafting = pair.drafting(head);
  request_options request;
  request.max_tokens = 24;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 16; ++i)
    prompt.push_back(static_cast<int32_t>((i * 61) % 4000 + 20));

  // One sequence: batch 1 throughout.
  engine alone(*pair.target, *pair.dev, drafting);
  const int64_t id = alone.submit(prompt, request).value();
  alone.run_until_idle();
  CHECK(alone.speculation().drafted_tokens == 0);
  CHECK(alone.speculation().proposed_tokens > 0);  // computed, then cut
  engine plain(*pair.target, *pair.dev, engine_options{});
  const int64_t plain_id = plain.submit(prompt, request).value();
  plain.run_until_idle();
  CHECK(alone.output(id) == plain.output(plain_id));

  // Four sequences decoding together: drafts are verified, and the tokens stay plain decoding's.
  speculation_stats stats;
  const auto together = outputs(*pair.target, *pair.dev, drafting, request, &stats);
  CHECK(stats.drafted_tokens > stats.verify_steps);  // more than one draft a step
  CHECK(together == outputs(*pair.target, *pair.dev, engine_options{}, request));
}

// The actor topology gives the single-process engine's answer, whatever its shape, and keeps
// every request alive through a decode worker's death.
#include "deploy/topology.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/collecting_sink.hpp"
#include "actors/small_model.hpp"
#include "common/metrics.hpp"
#include "model/engine.hpp"
#include "model/model_writer.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;

namespace {

struct model_fixture : testing::small_model {
  model_fixture() : small_model("topology", 21) {}
};

std::vector<int32_t> prompt(int i) {
  std::vector<int32_t> p;
  for (int t = 0; t < 3 + (i * 7) % 40; ++t)
    p.push_back((i * 97 + t * 31) % 500);
  return p;
}

// What the single-process engine generates for each prompt, greedily.
std::vector<std::vector<int32_t>> engine_outputs(const std::string& dir, int n, int max_tokens,
                                                 gpu::dtype kv_dtype = gpu::dtype::f32) {
  auto dev = gpu::make_cpu_backend();
  auto m = model::loaded_model::load(dir, *dev, true);
  REQUIRE(m.ok());
  model::engine_options options;
  options.kv_dtype = kv_dtype;
  model::engine eng(*m.value(), *dev, options);
  model::request_options req;
  req.max_tokens = max_tokens;
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(eng.submit(prompt(i), req).value());
  eng.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids)
    out.push_back(eng.output(id));
  return out;
}

config::manifest manifest_for(const std::string& dir, int shards, int decoders) {
  config::manifest m = config::default_manifest(dir);
  m.experts.count = shards;
  m.decode.count = decoders;
  m.decode.max_running = 8;
  return m;
}

std::vector<std::shared_ptr<testing::collecting_sink>> submit_prompts(
    serve::inference_service& svc, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
    const model::sampling_params& sampling = {}, int64_t first_id = 1) {
  std::vector<std::shared_ptr<testing::collecting_sink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    serve::generation_request r;
    r.id = static_cast<int64_t>(i) + first_id;
    r.prompt = prompts[i];
    r.max_tokens = max_tokens;
    r.sampling = sampling;
    auto sink = std::make_shared<testing::collecting_sink>();
    REQUIRE(svc.submit(r, sink).ok());
    sinks.push_back(sink);
  }
  return sinks;
}

std::vector<std::shared_ptr<testing::collecting_sink>> submit_all(serve::inference_service& svc,
                                                                  int n, int max_tokens,
                                                                  int64_t first_id = 1) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i)
    prompts.push_back(prompt(i));
  return submit_prompts(svc, prompts, max_tokens, {}, first_id);
}

// Every request ended once, without error, with the expected tokens. A request that does not end
// shows the roles' statuses, which say where it is stuck.
void check_outputs(deploy::topology& topo,
                   const std::vector<std::shared_ptr<testing::collecting_sink>>& sinks,
                   const std::vector<std::vector<int32_t>>& expected) {
  REQUIRE(sinks.size() == expected.size());
  for (size_t i = 0; i < sinks.size(); ++i) {
    INFO("prompt " << i);
    const bool done = sinks[i]->wait();
    if (!done) UNSCOPED_INFO("role statuses: " << topo.statuses_json());
    REQUIRE(done);
    CHECK_FALSE(sinks[i]->failed());
    CHECK(sinks[i]->tokens() == expected[i]);
    CHECK(sinks[i]->terminal_calls() == 1);
  }
}

// Polls the registry until `name` is alive in a later generation than `generation`.
void wait_for_restart(deploy::topology& topo, const std::string& name, int generation) {
  for (int tries = 0; tries < 400; ++tries) {
    const auto snapshot = nlohmann::json::parse(topo.actors_json());
    for (const auto& a : snapshot["actors"]) {
      if (a["name"] == name && a["alive"].get<bool>() && a["generation"].get<int>() > generation) {
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL(name << " was not restarted within 20 s: " << topo.actors_json());
}

}  // namespace

TEST_CASE("the topology reproduces the engine for any number of shards and decoders",
          "[topology]") {
  model_fixture f;
  const int n = 12, max_tokens = 10;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens);
  for (auto [shards, decoders] : {std::pair{1, 1}, {2, 1}, {4, 2}, {8, 2}}) {
    INFO("shards " << shards << " decode workers " << decoders);
    auto topo = deploy::topology::start(manifest_for(f.dir.path(), shards, decoders));
    REQUIRE(topo.ok());
    auto sinks = submit_all(topo.value()->service(), n, max_tokens);
    check_outputs(*topo.value(), sinks, expected);
  }
}

TEST_CASE("with a bf16 KV cache the topology gives the bf16 engine's answer (P=2 D=2)",
          "[topology][bf16]") {
  model_fixture f;
  const int n = 10, max_tokens = 10;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens, gpu::dtype::bf16);
  config::manifest m = manifest_for(f.dir.path(), 2, 2);
  m.prefill.count = 2;
  m.kv_dtype = gpu::dtype::bf16;
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  auto sinks = submit_all(topo.value()->service(), n, max_tokens);
  check_outputs(*topo.value(), sinks, expected);
}

TEST_CASE("decode worker killed mid-stream (P=1 D=2): same tokens, none twice", "[topology]") {
  model_fixture f;
  const int n = 8, max_tokens = 40;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens);
  auto topo = deploy::topology::start(manifest_for(f.dir.path(), 4, 2));
  REQUIRE(topo.ok());
  auto sinks = submit_all(topo.value()->service(), n, max_tokens);
  REQUIRE(sinks[0]->wait_tokens(5));
  REQUIRE(topo.value()->kill("decode-0").ok());
  check_outputs(*topo.value(), sinks, expected);
  // The registry hears of the death and the restart asynchronously, the restart after the
  // supervisor's backoff, and the requests may all have ended before either.
  wait_for_restart(*topo.value(), "decode-0", 1);
  nlohmann::json entry;
  const auto snapshot = nlohmann::json::parse(topo.value()->actors_json());
  for (const auto& a : snapshot["actors"]) {
    if (a["name"] == "decode-0") entry = a;
  }
  REQUIRE_FALSE(entry.is_null());
  CHECK(entry["alive"].get<bool>());
  CHECK(entry["generation"].get<int>() == 2);
  CHECK(entry["restarts"].get<int>() == 1);
  CHECK(entry["death_cause"].get<std::string>().find("kill") != std::string::npos);
}

TEST_CASE("an expert shard killed mid-stream: the stalled layer is resent", "[topology]") {
  model_fixture f;
  const int n = 6, max_tokens = 30;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens);
  auto topo = deploy::topology::start(manifest_for(f.dir.path(), 4, 1));
  REQUIRE(topo.ok());
  auto sinks = submit_all(topo.value()->service(), n, max_tokens);
  REQUIRE(sinks[0]->wait_tokens(3));
  REQUIRE(topo.value()->kill("expert_shard-1").ok());
  check_outputs(*topo.value(), sinks, expected);
}

TEST_CASE("cancelled requests end with an error and free their worker", "[topology]") {
  model_fixture f;
  auto topo = deploy::topology::start(manifest_for(f.dir.path(), 2, 1));
  REQUIRE(topo.ok());
  auto sinks = submit_all(topo.value()->service(), 3, 200);
  REQUIRE(sinks[1]->wait_tokens(2));
  topo.value()->service().cancel(2);
  REQUIRE(sinks[1]->wait());
  CHECK(sinks[1]->failed());
  CHECK(sinks[1]->err().code == errc::cancelled);
  REQUIRE(sinks[0]->wait());
  REQUIRE(sinks[2]->wait());
  CHECK(sinks[0]->tokens().size() == 200);
}

namespace {

// Waits until the migration started last has ended (adopted or rolled back).
void wait_for_migration(deploy::topology& topo) {
  for (int tries = 0; tries < 6000; ++tries) {
    if (nlohmann::json::parse(topo.experts_json())["migration"].is_null()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("the migration did not end within 6 s");
}

}  // namespace

TEST_CASE("outputs stay identical across 100 random re-plans during generation",
          "[topology][eplb]") {
  model_fixture f;
  const int n = 6, max_tokens = 3000;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens);
  config::manifest m = manifest_for(f.dir.path(), 4, 2);
  m.experts.slots_per_shard = 3;  // 12 slots for 8 experts: room for replicas
  m.eplb.enabled = false;         // only the test's re-plans
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  // Twenty waves of the same requests, five re-plans each, spread over the wave's generation:
  // one every three tokens of its first request. A migration spans tens of decode steps of
  // this small model, so a wave holds only a few of them.
  constexpr uint64_t waves = 20, per_wave = 5;
  for (uint64_t wave = 0; wave < waves; ++wave) {
    auto sinks =
        submit_all(topo.value()->service(), n, max_tokens, static_cast<int64_t>(wave) * n + 1);
    for (uint64_t k = 1; k <= per_wave; ++k) {
      const uint64_t seed = wave * per_wave + k;
      INFO("re-plan seed " << seed);
      REQUIRE(sinks[0]->wait_tokens(3 * k));
      REQUIRE(topo.value()->replan_randomly(seed).ok());
      // The re-plan happened during generation: the request was still running after it began.
      CHECK(sinks[0]->tokens().size() < static_cast<size_t>(max_tokens));
      wait_for_migration(*topo.value());
    }
    check_outputs(*topo.value(), sinks, expected);
  }
  const auto experts = nlohmann::json::parse(topo.value()->experts_json());
  CHECK(experts["rebalances"]["adopted"].get<int>() == 100);
  CHECK(experts["epoch"].get<int>() == 100);
  CHECK(experts["copy_interval_ms"].get<int>() == m.eplb.copy_interval_ms);
  // Every new expert came from a shard that held it, none read from the checkpoint again: shared
  // through the process's index, or sent by the holder when asked.
  int64_t copied = 0, indexed = 0, sent = 0;
  for (const auto& s : nlohmann::json::parse(topo.value()->statuses_json())) {
    if (s["role"] != "expert_shard") continue;
    const auto& received = s["detail"]["experts_received"];
    CHECK(received["from_checkpoint"].get<int64_t>() == 0);
    CHECK(received["other_nodes"].get<int64_t>() == 0);
    copied += received["same_node"].get<int64_t>();
    indexed += received["same_node_indexed"].get<int64_t>();
    sent += s["detail"]["experts_sent"].get<int64_t>();
  }
  CHECK(copied > 100);
  CHECK(indexed > 0);
  CHECK(indexed + sent == copied);
}

namespace {

// The newest load-sample window the supervisor closed (every shard reported it); -1 before any.
int64_t last_closed_window(deploy::topology& topo) {
  const auto windows = nlohmann::json::parse(topo.experts_json())["windows"];
  return windows.empty() ? -1 : windows.back()["window"].get<int64_t>();
}

}  // namespace

TEST_CASE("load samples go on closing windows after an expert shard restarts", "[topology][eplb]") {
  model_fixture f;
  config::manifest m = manifest_for(f.dir.path(), 4, 1);
  m.eplb.enabled = false;  // sampling alone: no migration in the way
  m.eplb.sample_interval_steps = 4;
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  auto run_requests = [&] {
    for (const auto& sink : submit_all(topo.value()->service(), 4, 30)) {
      REQUIRE(sink->wait());
      CHECK_FALSE(sink->failed());
    }
  };
  run_requests();
  const int64_t before = last_closed_window(*topo.value());
  REQUIRE(before >= 0);
  REQUIRE(topo.value()->kill("expert_shard-1").ok());
  wait_for_restart(*topo.value(), "expert_shard-1", 1);
  run_requests();
  // The restarted shard numbers its windows on from the supervisor's, so they close with the
  // others' instead of never.
  CHECK(last_closed_window(*topo.value()) > before + 2);
}

TEST_CASE("an expert shard killed mid-migration: rollback, serving goes on, outputs identical",
          "[topology][eplb]") {
  model_fixture f;
  const int n = 6, max_tokens = 40;
  const auto expected = engine_outputs(f.dir.path(), n, max_tokens);
  config::manifest m = manifest_for(f.dir.path(), 4, 1);
  m.experts.slots_per_shard = 3;
  m.eplb.enabled = false;
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  auto sinks = submit_all(topo.value()->service(), n, max_tokens);
  REQUIRE(sinks[0]->wait_tokens(3));
  // The shard dies in the supervisor's turn that starts the migration, its exit sent before the
  // prepares: it never prepares, so the migration cannot complete without it.
  REQUIRE(topo.value()->replan_randomly(7, 1.0, "expert_shard-2").ok());
  wait_for_migration(*topo.value());
  check_outputs(*topo.value(), sinks, expected);
  const auto events = nlohmann::json::parse(topo.value()->events_json(0));
  bool rolled_back = false, adopted = false;
  for (const auto& e : events) {
    if (e["kind"] == "migration_rolled_back") {
      rolled_back = true;
      CHECK_THAT(e["detail"].get<std::string>(), Catch::Contains("expert_shard-2"));
    }
    adopted |= e["kind"] == "migration_finished";
  }
  CHECK(rolled_back);
  CHECK_FALSE(adopted);
  const auto experts = nlohmann::json::parse(topo.value()->experts_json());
  CHECK(experts["epoch"].get<int>() == 0);
  CHECK(experts["rebalances"]["rolled_back"].get<int>() == 1);
  // Serving goes on after the rollback, and so does rebalancing: no shard's loader is held up by
  // the epoch that was given up.
  auto after = submit_all(topo.value()->service(), 1, 5);
  REQUIRE(after[0]->wait());
  CHECK_FALSE(after[0]->failed());
  // A kill that names no live actor starts nothing.
  const status missing = topo.value()->replan_randomly(9, 1.0, "expert_shard-99");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::not_found);
  CHECK(nlohmann::json::parse(topo.value()->experts_json())["migration"].is_null());
  const int before = experts["epoch"].get<int>();
  REQUIRE(topo.value()->replan_randomly(8).ok());
  wait_for_migration(*topo.value());
  CHECK(nlohmann::json::parse(topo.value()->experts_json())["epoch"].get<int>() > before);
}

namespace {

// A phrase said four times: its generation is what prompt lookup drafts from.
std::vector<int32_t> repetitive_prompt(int i) {
  std::vector<int32_t> p;
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 5 + i % 4; ++t)
      p.push_back((i * 53 + t * 29) % 500);
  }
  return p;
}

// The decode workers' speculation counts summed, from the statuses JSON.
nlohmann::json speculation_totals(deploy::topology& topo) {
  nlohmann::json total = {
      {"drafted_tokens", 0}, {"accepted_tokens", 0}, {"batch_limited_steps", 0}};
  for (const auto& role : nlohmann::json::parse(topo.statuses_json())) {
    if (role["role"] != "decode") continue;
    const auto& detail = role["detail"]["speculation"];
    for (const char* key : {"drafted_tokens", "accepted_tokens", "batch_limited_steps"})
      total[key] = total[key].get<int64_t>() + detail[key].get<int64_t>();
  }
  return total;
}

// Plain decoding in the single-process engine: the oracle speculation is held to.
std::vector<std::vector<int32_t>> plain_outputs(const std::string& dir,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                int max_tokens,
                                                const model::sampling_params& sampling) {
  auto dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(dir, *dev, true);
  REQUIRE(loaded.ok());
  model::engine eng(*loaded.value(), *dev, {});
  model::request_options req;
  req.max_tokens = max_tokens;
  req.sampling = sampling;
  std::vector<int64_t> ids;
  for (const auto& p : prompts)
    ids.push_back(eng.submit(p, req).value());
  eng.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids)
    out.push_back(eng.output(id));
  return out;
}

std::vector<std::vector<int32_t>> repetitive_prompts(int n) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i)
    prompts.push_back(repetitive_prompt(i));
  return prompts;
}

model::sampling_params sampled_params() {
  model::sampling_params s;
  s.temperature = 0.3f;
  s.top_k = 8;
  s.seed = 11;
  return s;
}

}  // namespace

TEST_CASE("speculative decoding through the topology gives the engine's tokens",
          "[topology][speculation]") {
  model_fixture f;
  const int n = 8, max_tokens = 32;
  const auto prompts = repetitive_prompts(n);
  for (const model::sampling_params& sampling : {model::sampling_params{}, sampled_params()}) {
    INFO("temperature " << sampling.temperature);
    const auto expected = plain_outputs(f.dir.path(), prompts, max_tokens, sampling);
    config::manifest m = manifest_for(f.dir.path(), 4, 2);
    m.decode.speculation.max_draft = 4;
    auto topo = deploy::topology::start(m);
    REQUIRE(topo.ok());
    auto sinks = submit_prompts(topo.value()->service(), prompts, max_tokens, sampling);
    check_outputs(*topo.value(), sinks, expected);
    // The comparison proves something only if drafts were both kept and thrown away.
    const auto totals = speculation_totals(*topo.value());
    INFO("speculation " << totals.dump());
    CHECK(totals["accepted_tokens"].get<int64_t>() > 0);
    CHECK(totals["drafted_tokens"].get<int64_t>() > totals["accepted_tokens"].get<int64_t>());
    CHECK(totals["batch_limited_steps"].get<int64_t>() == 0);  // no batch limit set
    // /metrics carries the same totals.
    metrics::registry reg;
    topo.value()->service().collect_metrics(reg);
    const std::string text = reg.prometheus_text();
    CHECK_THAT(text, Catch::Contains("brigade_speculative_accepted_tokens_total " +
                                     std::to_string(totals["accepted_tokens"].get<int64_t>())));
    CHECK_THAT(text, Catch::Contains("brigade_speculative_draft_tokens_total " +
                                     std::to_string(totals["drafted_tokens"].get<int64_t>())));
  }
}

TEST_CASE("speculation keeps the engine's tokens through re-plans and a decode worker's death",
          "[topology][speculation][eplb]") {
  model_fixture f;
  // Long enough that five migrations and the kill land while the requests run: with repetitive
  // prompts most drafts hold, and 300 tokens took about as long as five migrations.
  const int n = 8, max_tokens = 3000;
  const auto prompts = repetitive_prompts(n);
  for (const model::sampling_params& sampling : {model::sampling_params{}, sampled_params()}) {
    INFO("temperature " << sampling.temperature);
    const auto expected = plain_outputs(f.dir.path(), prompts, max_tokens, sampling);
    config::manifest m = manifest_for(f.dir.path(), 4, 2);
    m.experts.slots_per_shard = 3;  // room for replicas, so that re-plans move experts
    m.eplb.enabled = false;         // only the test's re-plans
    m.decode.speculation.max_draft = 4;
    auto topo = deploy::topology::start(m);
    REQUIRE(topo.ok());
    auto sinks = submit_prompts(topo.value()->service(), prompts, max_tokens, sampling);
    // Re-plans while drafts are verified, then the death of a decode worker holding half the
    // sequences: the router re-dispatches them and their drafts start again from their context.
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      REQUIRE(sinks[0]->wait_tokens(2 * seed));
      REQUIRE(topo.value()->replan_randomly(seed).ok());
      wait_for_migration(*topo.value());
    }
    CHECK(sinks[0]->tokens().size() < static_cast<size_t>(max_tokens));
    REQUIRE(topo.value()->kill("decode-0").ok());
    for (uint64_t seed = 6; seed <= 8; ++seed) {
      REQUIRE(topo.value()->replan_randomly(seed).ok());
      wait_for_migration(*topo.value());
    }
    check_outputs(*topo.value(), sinks, expected);
    const auto experts = nlohmann::json::parse(topo.value()->experts_json());
    CHECK(experts["rebalances"]["adopted"].get<int>() == 8);
    // Drafts were kept on the worker that lived: the comparison covered verified steps.
    CHECK(speculation_totals(*topo.value())["accepted_tokens"].get<int64_t>() > 0);
  }
}

TEST_CASE("a decode worker drafts nothing while more decode than disable_above_batch",
          "[topology][speculation]") {
  model_fixture f;
  const int n = 8, max_tokens = 32;
  const auto prompts = repetitive_prompts(n);
  const auto expected = plain_outputs(f.dir.path(), prompts, max_tokens, {});
  // The same requests with and without the limit, on one worker.
  auto run = [&](int disable_above_batch) {
    config::manifest m = manifest_for(f.dir.path(), 2, 1);
    m.decode.speculation.max_draft = 4;
    m.decode.speculation.disable_above_batch = disable_above_batch;
    auto topo = deploy::topology::start(m);
    REQUIRE(topo.ok());
    auto sinks = submit_prompts(topo.value()->service(), prompts, max_tokens);
    check_outputs(*topo.value(), sinks, expected);
    const auto totals = speculation_totals(*topo.value());
    metrics::registry reg;
    topo.value()->service().collect_metrics(reg);
    CHECK_THAT(reg.prometheus_text(),
               Catch::Contains("brigade_speculative_batch_limited_steps_total " +
                               std::to_string(totals["batch_limited_steps"].get<int64_t>())));
    return totals;
  };
  const auto limited = run(1);
  const auto unlimited = run(0);
  INFO("limited " << limited.dump() << ", unlimited " << unlimited.dump());
  // Eight requests on one worker decode together for most of their steps: those steps drafted
  // nothing. (Alone, at the start or the end, a sequence may still draft.)
  CHECK(limited["batch_limited_steps"].get<int64_t>() > 0);
  CHECK(unlimited["batch_limited_steps"].get<int64_t>() == 0);
  CHECK(limited["drafted_tokens"].get<int64_t>() < unlimited["drafted_tokens"].get<int64_t>());
}

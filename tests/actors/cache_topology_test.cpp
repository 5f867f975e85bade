// The prefix KV cache through the actor topology: hits give the logits and tokens of
// recomputing, retention per scenario under a warped clock, reference counts under random
// concurrent load, the KV store's SSD tier (corruption, a full disk, a restart) and cache-aware
// routing that keeps the prefill load even.
#include <sys/mount.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "actors/collecting_sink.hpp"
#include "actors/small_model.hpp"
#include "common/metrics.hpp"
#include "deploy/topology.hpp"
#include "model/engine.hpp"
#include "model/logprobs.hpp"
#include "model/model_writer.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using nlohmann::json;

namespace {

constexpr int block_tokens = 16;
// One block of the test model (small_model.hpp): 2 layers x keys and values x 16 tokens x 2 heads x
// 16 dims x 4 B.
constexpr uint64_t block_bytes = 2 * 2 * 16 * 2 * 16 * 4;

struct model_fixture : testing::small_model {
  model_fixture() : small_model("cache-topology", 33) {}
};

// A prompt of `length` tokens: the first `shared` come from family `family`, the rest from
// `unique` (different per prompt).
std::vector<int32_t> prompt(int family, int shared, int length, int unique) {
  std::vector<int32_t> p;
  for (int t = 0; t < length; ++t) {
    p.push_back(t < shared ? (family * 131 + t * 17) % 500 : (unique * 89 + t * 7) % 500 + 3);
  }
  return p;
}

// How many of the likeliest tokens the oracle compares at the first position: with their values,
// bit for bit, they pin the logits down far more than the sampled token does.
constexpr int compared_logprobs = model::max_top_logprobs;

struct engine_answer {
  std::vector<int32_t> tokens;
  model::position_logprobs first;  ///< The first token's log-probabilities.
};

std::vector<engine_answer> engine_answers(const std::string& dir,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          int max_tokens, gpu::dtype kv_dtype = gpu::dtype::f32) {
  auto dev = gpu::make_cpu_backend();
  auto m = model::loaded_model::load(dir, *dev, true);
  REQUIRE(m.ok());
  model::engine_options options;
  options.kv_dtype = kv_dtype;
  model::engine eng(*m.value(), *dev, options);
  model::request_options req;
  req.max_tokens = max_tokens;
  req.keep_logits = true;
  std::vector<engine_answer> out;
  for (const auto& p : prompts) {
    const int64_t id = eng.submit(p, req).value();
    eng.run_until_idle();
    const auto& logits = eng.kept_logits(id);
    const auto& tokens = eng.output(id);
    out.push_back({tokens, model::logprobs_at(logits.data(), m.value()->config.vocab_size,
                                              tokens.front(), compared_logprobs)});
  }
  return out;
}

config::manifest manifest_for(const std::string& dir, int prefill = 1, int decode = 1) {
  config::manifest m = config::default_manifest(dir);
  m.experts.count = 2;
  m.prefill.count = prefill;
  m.decode.count = decode;
  m.decode.max_running = 16;
  m.kv_cache.host_bytes = 0;  // pool only unless a test adds tiers
  return m;
}

struct answer {
  std::vector<int32_t> tokens;
  serve::generation_usage usage;
  std::vector<model::position_logprobs> logprobs;  ///< When asked for, one per token.
};

answer run(deploy::topology& topo, const std::vector<int32_t>& p, int max_tokens,
           const std::string& scenario = "chat", int top_logprobs = -1,
           const std::string& cache_salt = "") {
  static int64_t next_id = 1;
  serve::generation_request r;
  r.id = next_id++;
  r.prompt = p;
  r.max_tokens = max_tokens;
  r.scenario = scenario;
  r.top_logprobs = top_logprobs;
  r.cache_salt = cache_salt;
  auto sink = std::make_shared<testing::collecting_sink>();
  REQUIRE(topo.service().submit(r, sink).ok());
  REQUIRE(sink->wait());
  REQUIRE_FALSE(sink->failed());
  return {sink->tokens(), sink->usage(), sink->logprobs()};
}

// The same log-probabilities, bit for bit (compare the bytes, not the values).
bool same_bits(const model::position_logprobs& a, const model::position_logprobs& b) {
  auto same = [](const model::token_logprob& x, const model::token_logprob& y) {
    return x.token == y.token && std::memcmp(&x.logprob, &y.logprob, sizeof x.logprob) == 0;
  };
  if (!same(a.chosen, b.chosen) || a.top.size() != b.top.size()) return false;
  for (size_t i = 0; i < a.top.size(); ++i) {
    if (!same(a.top[i], b.top[i])) return false;
  }
  return true;
}

// The prefill workers check the prefix cache's reference counts after every change
// (O(pool blocks) each: a debugging aid production runs without).
void check_cache_invariants() {
  ::setenv("BRIGADE_CHECK_CACHE", "1", 1);
}

// The statuses of every role, by name.
std::map<std::string, json> statuses(const deploy::topology& topo) {
  std::map<std::string, json> out;
  for (const auto& s : json::parse(topo.statuses_json()))
    out[s["name"]] = s;
  return out;
}

// Waits until the KV store has received every demotion the prefill workers sent and written
// them all.
void wait_store_idle(const deploy::topology& topo) {
  for (int tries = 0; tries < 3000; ++tries) {
    const auto all = statuses(topo);
    auto it = all.find("kv_store-0");
    REQUIRE(it != all.end());
    const json& d = it->second["detail"];
    int64_t sent = 0;
    for (const auto& [name, s] : all) {
      if (s["role"] == "prefill") sent += s["detail"]["cache"].value("demotion_batches", 0);
    }
    if (d.value("open", false) && d.value("demotion_batches", -1) == sent &&
        d.value("queue_depth", 1) == 0 && d.value("pending_demotions", 1) == 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("the KV store did not finish its demotions within 15 s");
}

json store_detail(const deploy::topology& topo) {
  return statuses(topo).at("kv_store-0")["detail"];
}

// Waits until every prefill worker is idle and returns their cache details.
std::vector<json> idle_prefill_caches(const deploy::topology& topo) {
  for (int tries = 0; tries < 2000; ++tries) {
    std::vector<json> caches;
    bool idle = true;
    for (const auto& [name, s] : statuses(topo)) {
      if (s["role"] != "prefill") continue;
      idle = idle && s["queue_depth"] == 0 && s["in_flight"] == 0;
      caches.push_back(s["detail"]["cache"]);
    }
    if (idle) return caches;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("prefill workers did not become idle");
  return {};
}

}  // namespace

TEST_CASE("a cache hit gives the logits and tokens of recomputing (cache on vs off)",
          "[topology][kv_cache]") {
  model_fixture f;
  const int max_tokens = 8;
  const auto base = prompt(1, 200, 100, 0);
  std::vector<std::vector<int32_t>> prompts = {
      base,                                                   // a miss
      base,                                                   // the same prompt: a hit
      std::vector<int32_t>(base.begin(), base.begin() + 64),  // block-aligned: 3 blocks reused
      prompt(1, 70, 90, 1),                                   // shares 4 full blocks
      prompt(1, 33, 50, 2),                                   // shares 2 full blocks
      prompt(2, 0, 40, 3),                                    // shares nothing
  };
  const auto expected = engine_answers(f.dir.path(), prompts, max_tokens);
  std::map<bool, std::vector<answer>> answers;
  check_cache_invariants();
  for (bool cache_on : {false, true}) {
    INFO("cache " << (cache_on ? "on" : "off"));
    config::manifest m = manifest_for(f.dir.path());
    m.kv_cache.enabled = cache_on;
    m.prefill.max_step_tokens = 24;  // chunks that start and end inside blocks
    auto topo = deploy::topology::start(m, {});
    REQUIRE(topo.ok());
    for (const auto& p : prompts) {
      answers[cache_on].push_back(run(*topo.value(), p, max_tokens, "chat", compared_logprobs));
    }
    for (const auto& c : idle_prefill_caches(*topo.value())) {
      if (!cache_on) continue;
      CHECK(c["invariant_violations"] == 0);
      CHECK(c["invariant_checks"].get<int>() > 0);
    }
  }
  const std::vector<int> reused = {0, 96, 48, 64, 32, 0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i);
    CHECK(answers[true][i].tokens == expected[i].tokens);
    CHECK(answers[false][i].tokens == expected[i].tokens);
    REQUIRE(answers[true][i].logprobs.size() == answers[true][i].tokens.size());
    REQUIRE(answers[false][i].logprobs.size() == answers[false][i].tokens.size());
    CHECK(same_bits(answers[true][i].logprobs.front(), answers[false][i].logprobs.front()));
    CHECK(same_bits(answers[true][i].logprobs.front(), expected[i].first));
    CHECK(answers[true][i].usage.cached_tokens == reused[i]);
    CHECK(answers[false][i].usage.cached_tokens == 0);
    CHECK(answers[true][i].usage.prompt_tokens == static_cast<int>(prompts[i].size()));
  }
}

TEST_CASE("retention through the topology: agent blocks expire after 3 days, chat after 7",
          "[topology][kv_cache]") {
  using namespace std::chrono_literals;
  model_fixture f;
  auto clk = std::make_shared<kvcache::manual_clock>(kvcache::to_ns(24h * 1000));
  config::manifest m = manifest_for(f.dir.path());
  m.kv_cache.host_bytes = 64 * block_bytes;  // the host tier follows the same retention
  auto topo = deploy::topology::start(m, {}, clk);
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  const auto chat = prompt(3, 100, 65, 0), agent = prompt(4, 100, 65, 0);
  CHECK(run(t, chat, 2, "chat").usage.cached_tokens == 0);
  CHECK(run(t, agent, 2, "agent").usage.cached_tokens == 0);
  clk->advance(72h - 1s);
  CHECK(run(t, agent, 2, "agent").usage.cached_tokens == 64);  // a use: 3 more days from now
  clk->advance(72h + 1s);
  CHECK(run(t, agent, 2, "agent").usage.cached_tokens == 0);  // expired
  CHECK(run(t, chat, 2, "chat").usage.cached_tokens == 64);   // 6 days: still there
  clk->advance(168h - 1s);
  CHECK(run(t, chat, 2, "chat").usage.cached_tokens == 64);
  clk->advance(168h + 1s);
  CHECK(run(t, chat, 2, "chat").usage.cached_tokens == 0);
  // A request of an unknown scenario is refused before it runs.
  serve::generation_request r;
  r.id = 999;
  r.prompt = chat;
  r.scenario = "nightly";
  auto refused = std::make_shared<testing::collecting_sink>();
  REQUIRE(t.service().submit(r, refused).ok());
  REQUIRE(refused->wait());
  CHECK_FALSE(refused->accepted());
  CHECK(refused->err().code == errc::invalid_argument);
  CHECK_THAT(refused->err().message, Catch::Contains("nightly"));
}

TEST_CASE("random concurrent requests: no block freed while in use, no leak afterwards",
          "[topology][kv_cache]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  model_fixture f;
  const int n = 48, max_tokens = 4;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    const int family = static_cast<int>(rng() % 4);
    const int shared = 16 * static_cast<int>(1 + rng() % 5);
    const int length = 1 + static_cast<int>(rng() % 110);
    prompts.push_back(prompt(family, shared, length, i));
  }
  const auto expected = engine_answers(f.dir.path(), prompts, max_tokens);
  config::manifest m = manifest_for(f.dir.path(), 2, 2);
  m.prefill.kv_tokens = 40 * block_tokens;  // a small pool: evictions all the time
  m.prefill.max_step_tokens = 40;
  m.kv_cache.pool_bytes = 24 * block_bytes;
  m.kv_cache.host_bytes = 16 * block_bytes;
  check_cache_invariants();
  auto topo = deploy::topology::start(m, {});
  REQUIRE(topo.ok());
  auto& svc = topo.value()->service();
  std::vector<std::shared_ptr<testing::collecting_sink>> sinks;
  std::vector<bool> cancelled;
  for (int i = 0; i < n; ++i) {
    serve::generation_request r;
    r.id = 10000 + i;
    r.prompt = prompts[static_cast<size_t>(i)];
    r.max_tokens = max_tokens;
    r.scenario = rng() % 2 ? "chat" : "agent";
    sinks.push_back(std::make_shared<testing::collecting_sink>());
    REQUIRE(svc.submit(r, sinks.back()).ok());
    cancelled.push_back(rng() % 8 == 0);
    if (cancelled.back()) svc.cancel(r.id);
    if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 5));
  }
  for (int i = 0; i < n; ++i) {
    INFO("request " << i);
    REQUIRE(sinks[static_cast<size_t>(i)]->wait());
    if (cancelled[static_cast<size_t>(i)]) continue;
    CHECK_FALSE(sinks[static_cast<size_t>(i)]->failed());
    CHECK(sinks[static_cast<size_t>(i)]->tokens() == expected[static_cast<size_t>(i)].tokens);
  }
  int64_t hits = 0;
  for (const auto& c : idle_prefill_caches(*topo.value())) {
    CHECK(c["invariant_violations"] == 0);
    INFO(c["first_violation"].get<std::string>());
    CHECK(c["invariant_checks"].get<int>() > 0);
    // Idle: only what the cache holds is in use, and nothing is pinned.
    CHECK(c["pinned_blocks"] == 0);
    CHECK(c["used_blocks"] == c["cached_blocks"]);
    hits += c["pool_hit_tokens"].get<int64_t>() + c["host_hit_tokens"].get<int64_t>();
  }
  CHECK(hits > 0);
}

TEST_CASE(
    "cache-aware routing keeps max/mean prefill load at most 1.1 when every request "
    "shares its first block",
    "[topology][kv_cache]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  model_fixture f;
  auto topo = deploy::topology::start(manifest_for(f.dir.path(), 4, 2));
  REQUIRE(topo.ok());
  auto& svc = topo.value()->service();
  std::vector<std::shared_ptr<testing::collecting_sink>> sinks;
  for (int i = 0; i < 64; ++i) {
    serve::generation_request r;
    r.id = 20000 + i;
    r.prompt = prompt(7, 16, 56 + static_cast<int>(rng() % 80), i);
    r.max_tokens = 2;
    sinks.push_back(std::make_shared<testing::collecting_sink>());
    REQUIRE(svc.submit(r, sinks.back()).ok());
    if (i % 8 == 7) REQUIRE(sinks.back()->wait());  // waves, so that the cache fills
  }
  int cached = 0;
  for (auto& s : sinks) {
    REQUIRE(s->wait());
    REQUIRE_FALSE(s->failed());
    cached += s->usage().cached_tokens;
  }
  CHECK(cached > 0);
  idle_prefill_caches(*topo.value());
  std::vector<double> loads;
  for (const auto& [name, s] : statuses(*topo.value())) {
    if (s["role"] == "prefill") loads.push_back(s["detail"]["tokens_prefilled"].get<double>());
  }
  REQUIRE(loads.size() == 4);
  double mean = 0, max = 0;
  for (double l : loads) {
    mean += l / 4;
    max = std::max(max, l);
  }
  INFO("loads " << json(loads).dump());
  CHECK(max / mean <= 1.1);
}

namespace {

// A topology whose KV store keeps little in host memory and the rest on SSD.
config::manifest ssd_manifest(const std::string& model, const std::string& ssd_dir,
                              uint64_t ssd_bytes) {
  config::manifest m = manifest_for(model);
  m.kv_cache.pool_bytes = block_bytes;      // the pool keeps one block
  m.kv_cache.host_bytes = 2 * block_bytes;  // host memory two
  m.kv_cache.ssd_bytes = ssd_bytes;
  m.kv_cache.ssd_dir = ssd_dir;
  return m;
}

std::vector<std::filesystem::path> block_files(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".kvb") out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST_CASE("a corrupt SSD block is dropped and recomputed, never served", "[topology][kv_cache]") {
  model_fixture f;
  testing::temp_dir ssd{"cache-ssd"};
  const auto p = prompt(5, 200, 120, 0);  // 7 full blocks
  const auto expected = engine_answers(f.dir.path(), {p}, 6);
  auto topo = deploy::topology::start(ssd_manifest(f.dir.path(), ssd.path(), 1 << 20));
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  CHECK(run(t, p, 6).tokens == expected[0].tokens);
  wait_store_idle(t);
  const auto files = block_files(ssd.path());
  REQUIRE(files.size() >= 4);
  // Flip one payload byte in every block file.
  for (const auto& file : files) {
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(-7, std::ios::end);
    char c = 0;
    io.get(c);
    io.seekp(-7, std::ios::end);
    io.put(static_cast<char>(c ^ 0x5a));
  }
  const answer again = run(t, p, 6);
  CHECK(again.tokens == expected[0].tokens);
  // Only the pool's block was reused; the damaged ones were found out and recomputed.
  CHECK(again.usage.cached_tokens == 16);
  const json d = store_detail(t);
  CHECK(d["ssd"]["corrupt_blocks"].get<int>() >= 1);
  CHECK(d["lookup_ssd_hits"].get<int>() >= 1);
  CHECK(json::parse(topo.value()->statuses_json()).is_array());
}

TEST_CASE("tenants with different salts share no block in any tier; the same salt shares",
          "[topology][kv_cache]") {
  check_cache_invariants();
  model_fixture f;
  testing::temp_dir ssd{"cache-ssd"};
  const auto p = prompt(8, 200, 120, 0);  // 7 full blocks
  const auto expected = engine_answers(f.dir.path(), {p}, 6);
  auto topo = deploy::topology::start(ssd_manifest(f.dir.path(), ssd.path(), 1 << 20));
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  auto same_as_engine = [&](const answer& a) {
    CHECK(a.tokens == expected[0].tokens);
    REQUIRE_FALSE(a.logprobs.empty());
    CHECK(same_bits(a.logprobs.front(), expected[0].first));
  };
  const answer first = run(t, p, 6, "chat", compared_logprobs, "tenant-a");
  same_as_engine(first);
  CHECK(first.usage.cached_tokens == 0);
  wait_store_idle(t);
  // Tenant a's blocks are now in every tier: one in the pool, two in host memory, the rest on
  // SSD. Another salt, and no salt, find none of them, in any tier.
  REQUIRE(block_files(ssd.path()).size() >= 4);
  const json before = store_detail(t);
  for (const std::string salt : {"tenant-b", ""}) {
    INFO("salt '" << salt << "'");
    const answer other = run(t, p, 6, "chat", compared_logprobs, salt);
    same_as_engine(other);
    CHECK(other.usage.cached_tokens == 0);
    wait_store_idle(t);
  }
  const json after = store_detail(t);
  CHECK(after["lookup_host_hits"] == before["lookup_host_hits"]);
  CHECK(after["lookup_ssd_hits"] == before["lookup_ssd_hits"]);
  // Tenant a again: its own blocks still serve it (the others' pushed some further down).
  const answer again = run(t, p, 6, "chat", compared_logprobs, "tenant-a");
  same_as_engine(again);
  CHECK(again.usage.cached_tokens >= 16);
  INFO("store: " << store_detail(t).dump());
  CHECK(store_detail(t)["lookup_ssd_hits"].get<int>() > after["lookup_ssd_hits"].get<int>());
}

TEST_CASE("a KV store restart keeps the SSD tier", "[topology][kv_cache]") {
  model_fixture f;
  testing::temp_dir ssd{"cache-ssd"};
  const auto p = prompt(6, 200, 120, 0);
  const auto expected = engine_answers(f.dir.path(), {p}, 6);
  auto topo = deploy::topology::start(ssd_manifest(f.dir.path(), ssd.path(), 1 << 20));
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  CHECK(run(t, p, 6).tokens == expected[0].tokens);
  wait_store_idle(t);
  REQUIRE(block_files(ssd.path()).size() >= 4);
  REQUIRE(t.kill("kv_store-0").ok());
  // The supervisor restarts it after its backoff; the new one indexes the directory again.
  json d;
  for (int tries = 0; tries < 2000; ++tries) {
    const auto snapshot = json::parse(t.actors_json());
    bool restarted = false;
    for (const auto& a : snapshot["actors"]) {
      restarted |= a["name"] == "kv_store-0" && a["alive"].get<bool>() && a["generation"] == 2;
    }
    if (restarted) {
      d = store_detail(t);
      if (d.value("open", false)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(d.value("open", false));
  CHECK(d["ssd"]["blocks"].get<int>() >= 4);
  CHECK(d["host"]["blocks"] == 0);
  const answer again = run(t, p, 6);
  CHECK(again.tokens == expected[0].tokens);
  // One block from the pool and two from SSD: a lookup promotes no more blocks than host
  // memory (two) holds. The two the old store held in host memory died with it.
  INFO("role statuses: " << t.statuses_json());
  CHECK(again.usage.cached_tokens == 48);
  CHECK(statuses(t).at("prefill-0")["detail"]["cache"]["ssd_hit_tokens"] == 32);
  CHECK(store_detail(t)["promotions"].get<int>() == 2);
  // The metrics show where the hits came from.
  metrics::registry reg;
  t.service().collect_metrics(reg);
  const std::string text = reg.prometheus_text();
  CHECK_THAT(text, Catch::Contains("brigade_prefix_cache_hit_rate{tier=\"ssd\"}"));
  CHECK_THAT(text, Catch::Contains("brigade_prefix_cache_scenario_hit_rate{scenario=\"chat\"}"));
  CHECK_THAT(text, Catch::Contains("brigade_kv_store_blocks{tier=\"ssd\"}"));
}

TEST_CASE("bf16 KV blocks take half the bytes, hit as bf16, and never serve an f32 deployment",
          "[topology][kv_cache][bf16]") {
  model_fixture f;
  testing::temp_dir ssd{"cache-ssd"};
  const auto p = prompt(7, 200, 120, 0);
  const auto expected_bf16 = engine_answers(f.dir.path(), {p}, 6, gpu::dtype::bf16);
  const auto expected_f32 = engine_answers(f.dir.path(), {p}, 6);
  {
    config::manifest m = ssd_manifest(f.dir.path(), ssd.path(), 1 << 20);
    m.kv_dtype = gpu::dtype::bf16;
    // One block in the pool and two in host memory, as ssd_manifest's f32 budgets hold.
    m.kv_cache.pool_bytes = block_bytes / 2;
    m.kv_cache.host_bytes = 2 * block_bytes / 2;
    auto topo = deploy::topology::start(m);
    REQUIRE(topo.ok());
    auto& t = *topo.value();
    CHECK(run(t, p, 6).tokens == expected_bf16[0].tokens);
    wait_store_idle(t);
    CHECK(store_detail(t)["block_bytes"] == block_bytes / 2);
    REQUIRE(block_files(ssd.path()).size() >= 4);
    const answer again = run(t, p, 6);
    CHECK(again.tokens == expected_bf16[0].tokens);
    CHECK(again.usage.cached_tokens > 0);
  }
  // The same model and SSD directory under f32: the bf16 blocks are another layout's.
  auto topo = deploy::topology::start(ssd_manifest(f.dir.path(), ssd.path(), 1 << 20));
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  const answer first = run(t, p, 6);
  CHECK(first.tokens == expected_f32[0].tokens);
  CHECK(first.usage.cached_tokens == 0);
  CHECK(statuses(t).at("prefill-0")["detail"]["cache"]["ssd_hit_tokens"] == 0);
  CHECK(store_detail(t)["block_bytes"] == block_bytes);
}

TEST_CASE("a full disk stops demotion with a warning and loses nothing from upper tiers",
          "[topology][kv_cache]") {
  model_fixture f;
  testing::temp_dir ssd{"cache-tmpfs"};
  if (geteuid() != 0 || ::mount("tmpfs", ssd.path().c_str(), "tmpfs", 0, "size=64k") != 0) {
    WARN("skipped: mounting a small tmpfs needs root (" << std::strerror(errno) << ")");
    return;
  }
  struct unmount {
    std::string path;
    ~unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } cleanup{ssd.path()};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i)
    prompts.push_back(prompt(10 + i, 300, 200, i));  // 12 blocks each
  const auto expected = engine_answers(f.dir.path(), prompts, 4);
  config::manifest m = ssd_manifest(f.dir.path(), ssd.path(), 1 << 30);
  m.kv_cache.host_bytes = 16 * block_bytes;
  auto topo = deploy::topology::start(m);
  REQUIRE(topo.ok());
  auto& t = *topo.value();
  for (size_t i = 0; i < prompts.size(); ++i) {
    CHECK(run(t, prompts[i], 4).tokens == expected[i].tokens);
    wait_store_idle(t);
  }
  const json d = store_detail(t);
  CHECK(d["disk_full_pauses"].get<int>() >= 1);
  CHECK(d["ssd"]["disk_full_events"].get<int>() >= 1);
  // The last prompt's blocks are still in host memory and serve a hit.
  const answer again = run(t, prompts.back(), 4);
  CHECK(again.tokens == expected.back().tokens);
  CHECK(again.usage.cached_tokens >= 16 + 4 * 16);
  // Whatever reached the disk before it filled is whole.
  for (const auto& file : block_files(ssd.path())) {
    CHECK(std::filesystem::file_size(file) > block_bytes);
  }
}

#include "config/manifest.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace brigade;

namespace {

std::string parse_error(const std::string& yaml) {
  auto m = config::parse_manifest(yaml, "m.yaml");
  REQUIRE_FALSE(m.ok());
  return m.err().message;
}

}  // namespace

TEST_CASE("a full manifest parses", "[manifest]") {
  auto m = config::parse_manifest(R"(
model: /models/x
block_tokens: 32
serve: {listen: "0.0.0.0:9000", api_keys: [a, b], admission_queue: 10, model_name: my-moe}
roles:
  prefill: {count: 2, max_step_tokens: 256}
  decode: {count: 3, max_running: 16, kv_tokens: 1024}
  expert_shard: {count: 8, slots_per_shard: 3}
restart: {max_restarts: 2, window_s: 5.5, backoff_ms: 10, max_backoff_ms: 100}
)",
                                  "m.yaml");
  REQUIRE(m.ok());
  CHECK(m->model == "/models/x");
  CHECK(m->block_tokens == 32);
  CHECK(m->listen == "0.0.0.0:9000");
  CHECK(m->api_keys == std::vector<serve::api_key>{{"a", ""}, {"b", ""}});
  CHECK(m->served_model_name == "my-moe");
  CHECK(m->admission_queue == 10);
  CHECK(m->prefill.count == 2);
  CHECK(m->decode.count == 3);
  CHECK(m->decode.max_running == 16);
  CHECK(m->experts.count == 8);
  CHECK(m->experts.slots_per_shard == 3);
  CHECK(m->restart.window_s == 5.5);
}

TEST_CASE("manifest errors name the field and the problem", "[manifest]") {
  CHECK_THAT(parse_error("model: [1"), Catch::Contains("not valid YAML"));
  CHECK_THAT(parse_error("serve: {listen: x}"), Catch::Contains("'model'"));
  CHECK_THAT(parse_error("model: m\nroles: {decode: {count: 0}}"),
             Catch::Contains("'roles.decode.count'") && Catch::Contains("between"));
  CHECK_THAT(parse_error("model: m\nroles: {decode: {cuont: 2}}"),
             Catch::Contains("'roles.decode.cuont'") && Catch::Contains("not a known field"));
  CHECK_THAT(parse_error("model: m\nroles: {expert_shard: {count: two}}"),
             Catch::Contains("'roles.expert_shard.count'") && Catch::Contains("integer"));
  CHECK_THAT(parse_error("model: m\nserve: {listen: 'localhost'}"),
             Catch::Contains("serve.listen") && Catch::Contains("HOST:PORT"));
  CHECK_THAT(parse_error("model: m\nserve: {api_keys: key}"), Catch::Contains("'serve.api_keys'"));
  CHECK_THAT(parse_error("model: m\neplb: {copy_interval_ms: -5}"),
             Catch::Contains("eplb.copy_interval_ms"));
  CHECK_THAT(parse_error("model: m\nroles: [1, 2]"), Catch::Contains("'roles'"));
  CHECK_THAT(parse_error("model: a\nmodel: b"),
             Catch::Contains("'model'") && Catch::Contains("twice"));
  CHECK_THAT(parse_error("model: m\nroles: {decode: {count: 1, count: 2}}"),
             Catch::Contains("'roles.decode.count'") && Catch::Contains("twice"));
  CHECK_THAT(parse_error("model: m\nrestart: {window_s: .nan}"),
             Catch::Contains("'restart.window_s'") && Catch::Contains("finite"));
  CHECK_THAT(parse_error("model: m\neplb: {margin: .inf}"),
             Catch::Contains("'eplb.margin'") && Catch::Contains("finite"));
  const std::string nodes =
      "model: m\njoin_secret_file: /s\nnodes:\n"
      "  - {name: a, address: '127.0.0.1:7100', roles: {prefill: 1, decode: 1}}\n";
  CHECK_THAT(parse_error(nodes + "  - {name: local, address: '127.0.0.1:7101', "
                                 "roles: {expert_shard: 1}}\n"),
             Catch::Contains("'local' is reserved"));
  CHECK_THAT(parse_error(nodes + "  - {name: b, address: '127.0.0.1:0', "
                                 "roles: {expert_shard: 1}}\n"),
             Catch::Contains("port 0"));
  CHECK(config::parse_manifest(nodes + "  - {name: b, address: '127.0.0.1:7101', "
                                       "roles: {expert_shard: 1}}\n",
                               "m.yaml")
            .ok());

  CHECK_THAT(parse_error("- a\n- b"), Catch::Contains("mapping"));
  CHECK_THAT(parse_error("model: m\nrestart: {window_s: -1}"), Catch::Contains("restart.window_s"));
  // YAML allows lists and mappings as keys; no field is named so (these threw from yaml-cpp).
  CHECK_THAT(parse_error("model: m\n? [a, b]\n: 1"),
             Catch::Contains("the manifest has a key that is not a field name"));
  CHECK_THAT(parse_error("model: m\nroles: {decode: {? {x: 1} : 2}}"),
             Catch::Contains("roles.decode has a key that is not a field name"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {scenarios: {? [chat] : 7d}}"),
             Catch::Contains("'kv_cache.scenarios'") && Catch::Contains("not a scenario name"));
}

TEST_CASE("the example manifests are valid", "[manifest]") {
  auto m =
      config::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/single-node.yaml");
  REQUIRE(m.ok());
  CHECK(m->experts.count == 8);
  // Spare slots: 24 for the default model's 16 experts, so hot experts can be replicated.
  CHECK(m->experts.count * m->experts.slots_per_shard > 16);
  CHECK(m->kv_cache.pool_bytes == 64ull << 20);
  CHECK(m->eplb.replan_interval_steps == 10000);
  CHECK(m->eplb.copy_interval_ms == 100);
  auto three =
      config::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/three-nodes.yaml");
  INFO((three.ok() ? std::string() : three.err().message));
  REQUIRE(three.ok());
  CHECK(three->nodes.size() == 3);
  CHECK(three->decode.count == 2);
}

TEST_CASE("kv_cache: budgets, the SSD directory and retention per scenario",
          "[manifest][kv_cache]") {
  auto m = config::parse_manifest(R"(
model: m
kv_cache:
  enabled: true
  pool_bytes: 4MiB
  host_bytes: 2GiB
  ssd_bytes: 1000000
  ssd_dir: /var/cache/brigade
  scenarios: {agent: 2d, batch: 12h, nightly: 3600}
)",
                                  "m.yaml");
  REQUIRE(m.ok());
  const auto& kv = m->kv_cache;
  CHECK(kv.enabled);
  CHECK(kv.pool_bytes == 4u << 20);
  CHECK(kv.host_bytes == uint64_t{2} << 30);
  CHECK(kv.ssd_bytes == 1000000);
  CHECK(kv.ssd_dir == "/var/cache/brigade");
  CHECK(kv.has_store());
  std::map<std::string, int64_t> retention;
  for (const auto& s : kv.scenarios)
    retention[s.name] = s.retention_s;
  CHECK(retention ==
        std::map<std::string, int64_t>{
            {"chat", 7 * 86400}, {"agent", 2 * 86400}, {"batch", 12 * 3600}, {"nightly", 3600}});
}

TEST_CASE("kv_cache defaults: on, pool and host tiers, chat 7 days, agent 3 days",
          "[manifest][kv_cache]") {
  auto m = config::parse_manifest("model: m", "m.yaml");
  REQUIRE(m.ok());
  CHECK(m->kv_cache.enabled);
  CHECK(m->kv_cache.pool_bytes == 0);
  CHECK(m->kv_cache.host_bytes > 0);
  CHECK(m->kv_cache.ssd_dir.empty());
  REQUIRE(m->kv_cache.scenarios.size() == 2);
  CHECK(m->kv_cache.scenarios[0].name == "chat");
  CHECK(m->kv_cache.scenarios[0].retention_s == 7 * 86400);
  CHECK(m->kv_cache.scenarios[1].name == "agent");
  CHECK(m->kv_cache.scenarios[1].retention_s == 3 * 86400);
  auto off = config::parse_manifest("model: m\nkv_cache: {enabled: false}", "m.yaml");
  REQUIRE(off.ok());
  CHECK_FALSE(off->kv_cache.has_store());
}

TEST_CASE("bad kv_cache fields are refused, naming the field", "[manifest][kv_cache]") {
  CHECK_THAT(parse_error("model: m\nkv_cache: {enabeld: true}"),
             Catch::Contains("'kv_cache.enabeld'") && Catch::Contains("not a known field"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {enabled: maybe}"),
             Catch::Contains("'kv_cache.enabled'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {host_bytes: lots}"),
             Catch::Contains("'kv_cache.host_bytes'") && Catch::Contains("size in bytes"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {pool_bytes: 12XB}"),
             Catch::Contains("'kv_cache.pool_bytes'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {host_bytes: -1}"),
             Catch::Contains("'kv_cache.host_bytes'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {ssd_bytes: 1GiB}"),
             Catch::Contains("'kv_cache.ssd_dir'") && Catch::Contains("missing"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {host_bytes: 0, ssd_bytes: 1GiB, ssd_dir: /tmp}"),
             Catch::Contains("'kv_cache.host_bytes'") && Catch::Contains("SSD"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {ssd_dir: /tmp/x}"),
             Catch::Contains("'kv_cache.ssd_bytes'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {ssd_dir: [a]}"),
             Catch::Contains("'kv_cache.ssd_dir'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {scenarios: [chat]}"),
             Catch::Contains("'kv_cache.scenarios'") && Catch::Contains("mapping"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {scenarios: {agent: 0}}"),
             Catch::Contains("'kv_cache.scenarios.agent'") && Catch::Contains("positive"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {scenarios: {agent: 3 weeks}}"),
             Catch::Contains("'kv_cache.scenarios.agent'"));
  CHECK_THAT(parse_error("model: m\nkv_cache: {scenarios: {Bad Name: 1d}}"),
             Catch::Contains("'kv_cache.scenarios.Bad Name'") && Catch::Contains("invalid"));
  CHECK_THAT(parse_error("model: m\nkv_cache: [1]"), Catch::Contains("'kv_cache'"));
}

TEST_CASE("roles.decode.speculation: off by default, set field by field", "[manifest]") {
  auto plain = config::parse_manifest("model: m\n", "m.yaml");
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->decode.speculation.enabled());
  auto m = config::parse_manifest(R"(
model: m
roles:
  decode: {speculation: {max_draft: 5, min_trust: 0.75, max_ngram: 3, min_ngram: 1,
                         disable_above_batch: 8}}
)",
                                  "m.yaml");
  REQUIRE(m.ok());
  CHECK(m->decode.speculation.max_draft == 5);
  CHECK(m->decode.speculation.min_trust == 0.75);
  CHECK(m->decode.speculation.max_ngram == 3);
  CHECK(m->decode.speculation.min_ngram == 1);
  CHECK(m->decode.speculation.disable_above_batch == 8);
  // The measured gate is on unless the manifest turns it off.
  CHECK(plain->decode.speculation.measured_gate);
  CHECK(m->decode.speculation.measured_gate);
  auto ungated = config::parse_manifest(
      "model: m\nroles:\n  decode: {speculation: {max_draft: 2, "
      "measured_gate: false}}\n",
      "m.yaml");
  REQUIRE(ungated.ok());
  CHECK_FALSE(ungated->decode.speculation.measured_gate);
}

TEST_CASE("roles.decode.speculation.draft: prompt lookup, or a draft model drafting 5",
          "[manifest]") {
  auto plain = config::parse_manifest("model: m\n", "m.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->decode.speculation.draft == model::draft_kind::lookup);
  const std::string head = "model: m\nroles: {decode: {speculation: ";
  auto drafting = config::parse_manifest(head + "{draft: model, draft_model: /d}}}", "m.yaml");
  REQUIRE(drafting.ok());
  CHECK(drafting->decode.speculation.draft == model::draft_kind::model);
  CHECK(drafting->decode.speculation.draft_model == "/d");
  CHECK(drafting->decode.speculation.max_draft == model::default_model_drafts);
  CHECK(drafting->decode.speculation.enabled());
  // draft_model alone means a draft model; max_draft still decides how many.
  auto implied = config::parse_manifest(head + "{draft_model: /d, max_draft: 3}}}", "m.yaml");
  REQUIRE(implied.ok());
  CHECK(implied->decode.speculation.draft == model::draft_kind::model);
  CHECK(implied->decode.speculation.max_draft == 3);
  auto off = config::parse_manifest(head + "{draft: none, max_draft: 4}}}", "m.yaml");
  REQUIRE(off.ok());
  CHECK_FALSE(off->decode.speculation.enabled());
  // The draft attends as its own draft_settings.json says (-1) unless the manifest sets a
  // window; 0: all.
  CHECK(drafting->decode.speculation.draft_attention_window == -1);
  for (int window : {0, 64}) {
    auto set = config::parse_manifest(
        head + "{draft_model: /d, draft_attention_window: " + std::to_string(window) + "}}}",
        "m.yaml");
    REQUIRE(set.ok());
    CHECK(set->decode.speculation.draft_attention_window == window);
  }
}

TEST_CASE("bad speculation fields are refused, naming the field", "[manifest]") {
  const std::string head = "model: m\nroles: {decode: {speculation: ";
  CHECK_THAT(parse_error(head + "{max_draft: 65}}}"),
             Catch::Contains("'roles.decode.speculation.max_draft'") && Catch::Contains("between"));
  CHECK_THAT(parse_error(head + "{min_trust: 1.5}}}"),
             Catch::Contains("'roles.decode.speculation.min_trust'") && Catch::Contains("(0, 1]"));
  CHECK_THAT(parse_error(head + "{min_trust: 0}}}"),
             Catch::Contains("'roles.decode.speculation.min_trust'"));
  CHECK_THAT(parse_error(head + "{max_ngram: 2, min_ngram: 3}}}"),
             Catch::Contains("'roles.decode.speculation.max_ngram'") &&
                 Catch::Contains("at least min_ngram"));
  CHECK_THAT(parse_error(head + "{disable_above_batch: -2}}}"),
             Catch::Contains("'roles.decode.speculation.disable_above_batch'"));
  CHECK_THAT(parse_error(head + "{draft_attention_window: -1}}}"),
             Catch::Contains("'roles.decode.speculation.draft_attention_window'"));
  CHECK_THAT(parse_error(head + "{draft_attention_window: 1.5}}}"),
             Catch::Contains("'roles.decode.speculation.draft_attention_window'"));
  CHECK_THAT(parse_error(head + "{measured_gate: sometimes}}}"),
             Catch::Contains("'roles.decode.speculation.measured_gate'"));
  CHECK_THAT(
      parse_error(head + "{drafts: 3}}}"),
      Catch::Contains("'roles.decode.speculation.drafts'") && Catch::Contains("not a known field"));
  CHECK_THAT(parse_error(head + "4}}"),
             Catch::Contains("'roles.decode.speculation'") && Catch::Contains("mapping"));
  CHECK_THAT(parse_error(head + "{draft: eagle}}}"),
             Catch::Contains("'roles.decode.speculation.draft'") &&
                 Catch::Contains("lookup, model or none"));
  CHECK_THAT(
      parse_error(head + "{draft: model}}}"),
      Catch::Contains("'roles.decode.speculation.draft_model'") && Catch::Contains("is missing"));
  CHECK_THAT(parse_error(head + "{draft: lookup, draft_model: /d}}}"),
             Catch::Contains("'roles.decode.speculation.draft_model'") &&
                 Catch::Contains("draft is lookup"));
}

TEST_CASE("restart delays double up to the cap without overflowing", "[manifest]") {
  config::restart_policy p;
  p.backoff_ms = 50;
  p.max_backoff_ms = 5000;
  CHECK(p.delay_ms(0) == 50);
  CHECK(p.delay_ms(1) == 100);
  CHECK(p.delay_ms(6) == 3200);
  CHECK(p.delay_ms(7) == 5000);
  CHECK(p.delay_ms(1000) == 5000);
  p.backoff_ms = 2048;  // 2048 << 20 is past INT_MAX
  p.max_backoff_ms = 3600 * 1000;
  for (size_t n = 0; n < 40; ++n)
    CHECK(p.delay_ms(n) >= 2048);
  CHECK(p.delay_ms(30) == 3600 * 1000);
}

TEST_CASE("liveness: heartbeats, suspicion, the dead-after bound, rejoin window and grace",
          "[manifest]") {
  auto m = config::parse_manifest(R"(
model: /models/x
liveness: {heartbeat: 100ms, suspect_phi: 5, acceptable_pause: 1s, dead_after: 2.5s,
           rejoin_window: 500ms, redial_max_backoff: 1s, grace: 1m, no_worker_timeout: 10s}
)",
                                  "m.yaml");
  REQUIRE(m.ok());
  CHECK(m->liveness.heartbeat_ms == 100);
  CHECK(m->liveness.suspect_phi == 5);
  CHECK(m->liveness.acceptable_pause_ms == 1000);
  CHECK(m->liveness.dead_after_ms == 2500);
  CHECK(m->liveness.rejoin_window_ms == 500);
  CHECK(m->liveness.redial_max_backoff_ms == 1000);
  CHECK(m->liveness.grace_ms == 60000);
  CHECK(m->liveness.no_worker_timeout_ms == 10000);
  auto defaults = config::parse_manifest("model: /models/x\n", "m.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults->liveness.dead_after_ms == 3000);
  CHECK(defaults->liveness.grace_ms == 30000);
  CHECK_THAT(parse_error("model: x\nliveness: {dead_after: 300ms}\n"),
             Catch::Contains("'liveness.dead_after'") && Catch::Contains("two heartbeats"));
  CHECK_THAT(parse_error("model: x\nliveness: {heartbeat: soon}\n"),
             Catch::Contains("'liveness.heartbeat' must be a duration"));
  CHECK_THAT(parse_error("model: x\nliveness: {grace: -1s}\n"),
             Catch::Contains("'liveness.grace'"));
  CHECK_THAT(parse_error("model: x\nliveness: {dead_afer: 3s}\n"),
             Catch::Contains("'liveness.dead_afer' is not a known field"));
}

TEST_CASE("chat_format names one of the chat formats, or is left to the model", "[manifest]") {
  auto unset = config::parse_manifest("model: m\n", "m.yaml");
  REQUIRE(unset.ok());
  CHECK_FALSE(unset->chat_format.has_value());
  auto named = config::parse_manifest("model: m\nchat_format: deepseek_v3\n", "m.yaml");
  REQUIRE(named.ok());
  CHECK(named->chat_format == model::chat_format::deepseek_v3);
  CHECK_THAT(parse_error("model: m\nchat_format: llama3"),
             Catch::Contains("'chat_format'") && Catch::Contains("chatml, qwen3, mistral"));
}

TEST_CASE("kv_dtype: f32 by default, bf16 on request, anything else refused", "[manifest]") {
  auto plain = config::parse_manifest("model: /m\n", "m.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->kv_dtype == gpu::dtype::f32);
  auto half = config::parse_manifest("model: /m\nblock_tokens: 16\nkv_dtype: bf16\n", "m.yaml");
  REQUIRE(half.ok());
  CHECK(half->kv_dtype == gpu::dtype::bf16);
  const std::string bad = parse_error("model: /m\nkv_dtype: f16\n");
  CHECK_THAT(
      bad, Catch::Contains("kv_dtype") && Catch::Contains("'f16'") && Catch::Contains("f32, bf16"));
  CHECK_THAT(parse_error("model: /m\nkv_dtype: 16\n"), Catch::Contains("kv_dtype"));
}

TEST_CASE("kv_dtype bf16 is accepted for workers on a cuda device", "[manifest]") {
  // The CUDA backend keeps a bf16 KV cache as the CPU backend does (docs/devices.md).
  auto m = config::parse_manifest(
      "model: /m\nkv_dtype: bf16\nroles:\n  prefill: {count: 1, device: \"cuda:0\"}\n"
      "  decode: {count: 1, device: \"cuda:0\"}\n  expert_shard: {device: \"cuda:0\"}\n",
      "m.yaml");
  REQUIRE(m.ok());
  CHECK(m->kv_dtype == gpu::dtype::bf16);
}

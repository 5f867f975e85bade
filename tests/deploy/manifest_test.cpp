#include "deploy/manifest.hpp"

#include <catch2/catch.hpp>

using namespace brigade;

namespace {

std::string parse_error(const std::string& yaml) {
  auto m = deploy::parse_manifest(yaml, "m.yaml");
  REQUIRE_FALSE(m.ok());
  return m.err().message;
}

}  // namespace

TEST_CASE("a full manifest parses", "[manifest]") {
  auto m = deploy::parse_manifest(R"(
model: /models/x
block_tokens: 32
serve: {listen: "0.0.0.0:9000", api_keys: [a, b], admission_queue: 10}
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
  CHECK(m->api_keys == std::vector<std::string>{"a", "b"});
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
  CHECK_THAT(parse_error("model: m\nroles: [1, 2]"), Catch::Contains("'roles'"));
  CHECK_THAT(parse_error("- a\n- b"), Catch::Contains("mapping"));
  CHECK_THAT(parse_error("model: m\nrestart: {window_s: -1}"), Catch::Contains("restart.window_s"));
}

TEST_CASE("the example manifests are valid", "[manifest]") {
  auto m = deploy::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/single-node.yaml");
  REQUIRE(m.ok());
  CHECK(m->experts.count == 8);
}

// The manifest's eplb.group_placement: its values, its default, and the node layouts it refuses.
#include <catch2/catch.hpp>
#include <string>

#include "config/manifest.hpp"

using namespace brigade;

namespace {

const char* const two_nodes = R"(
join_secret_file: /etc/brigade/secret
nodes:
  - {name: a, address: "10.0.0.1:7000", roles: {prefill: 1, decode: 1, expert_shard: 4}}
  - {name: b, address: "10.0.0.2:7000", roles: {expert_shard: 4}}
  - {name: c, address: "10.0.0.3:7000", roles: {decode: 1}}
)";

std::string parse_error(const std::string& yaml) {
  auto m = config::parse_manifest(yaml, "m.yaml");
  REQUIRE_FALSE(m.ok());
  return m.err().message;
}

}  // namespace

TEST_CASE("group placement is free unless the manifest asks for node", "[manifest][groups]") {
  auto plain = config::parse_manifest("model: m\n", "m.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->eplb.placement == config::group_placement::free);
  auto node = config::parse_manifest(
      std::string("model: m\neplb: {group_placement: node}") + two_nodes, "m.yaml");
  INFO((node.ok() ? std::string() : node.err().message));
  REQUIRE(node.ok());
  CHECK(node->eplb.placement == config::group_placement::node);
  auto free = config::parse_manifest("model: m\neplb: {group_placement: free}", "m.yaml");
  REQUIRE(free.ok());
  CHECK(free->eplb.placement == config::group_placement::free);
}

TEST_CASE("group placement refuses values and nodes it cannot work with", "[manifest][groups]") {
  CHECK_THAT(
      parse_error("model: m\neplb: {group_placement: rack}"),
      Catch::Contains("field 'eplb.group_placement' is 'rack'") && Catch::Contains("node or free"));
  // One process: no nodes to keep groups on.
  CHECK_THAT(
      parse_error("model: m\neplb: {group_placement: node}"),
      Catch::Contains("'eplb.group_placement' is node") && Catch::Contains("lists no nodes"));
  const std::string one_host = R"(
join_secret_file: /etc/brigade/secret
nodes:
  - {name: a, address: "10.0.0.1:7000", roles: {prefill: 1, decode: 1, expert_shard: 4}}
  - {name: b, address: "10.0.0.2:7000", roles: {decode: 1}}
)";
  CHECK_THAT(parse_error("model: m\neplb: {group_placement: node}" + one_host),
             Catch::Contains("1 node hosts expert shards"));
  const std::string uneven = R"(
join_secret_file: /etc/brigade/secret
nodes:
  - {name: a, address: "10.0.0.1:7000", roles: {prefill: 1, decode: 1, expert_shard: 4}}
  - {name: b, address: "10.0.0.2:7000", roles: {expert_shard: 2}}
)";
  CHECK_THAT(parse_error("model: m\neplb: {group_placement: node}" + uneven),
             Catch::Contains("'eplb.group_placement' is node") &&
                 Catch::Contains("node 'a' hosts 4 expert shards and node 'b' 2"));
  // Free placement takes any nodes.
  CHECK(config::parse_manifest("model: m\neplb: {group_placement: free}" + uneven, "m.yaml").ok());
}

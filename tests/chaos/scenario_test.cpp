// Fault scenario files: what they may say, the errors that name the field, the manifest the
// runner completes, and the scenarios drawn for --random.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <set>

#include "chaos/random_scenario.hpp"
#include "chaos/scenario.hpp"

using namespace brigade;
using namespace brigade::chaos;

namespace {

const char* const three_nodes = R"(
name: t
topology:
  manifest:
    roles: {expert_shard: {slots_per_shard: 3}}
    nodes:
      - {name: n1, roles: {decode: 1, expert_shard: 2}}
      - {name: n2, roles: {prefill: 1, decode: 1, expert_shard: 2}}
      - {name: n3, roles: {prefill: 1, expert_shard: 1}}
)";

std::string parse_error(const std::string& yaml) {
  auto s = parse_scenario(yaml, "s.yaml", ".");
  REQUIRE_FALSE(s.ok());
  return s.err().message;
}

}  // namespace

TEST_CASE("a scenario parses: topology, workload, every form of fault time, checks", "[chaos]") {
  auto s = parse_scenario(std::string(three_nodes) + R"(
workload: {requests: 10, concurrency: 3, max_tokens: 20, sampling: mixed, stream: mixed,
           shared_prefix_tokens: 8, scenario: agent}
faults:
  - {at: 1.5s, kill: {node: n1}}
  - {at: {after: 2s}, restart: {node: n1}}
  - {at: {tokens: 100}, stop: coordinator, for: 3s}
  - {at: migration, kill: {role: expert_shard}}
  - {at: {random: [1s, 4s]}, partition: {node: n2, from: n3, plane: data}, for: 2s}
  - {at: 9s, network: {node: n3, peer: all, drop: 0.1, duplicate: 0.05, reorder: 0.2, delay: 5ms}}
  - {at: 10s, disk: {node: n2, slow: 20ms}, for: 1s}
  - {at: 11s, term: {node: n3}}
  - {at: 12s, replan: {seed: 4}}
checks: {errors_allowed: 2, detect: 500ms, serve_again: 4s, memory_growth: 1.5, exit: 8s}
)",
                          "s.yaml", ".");
  INFO((s.ok() ? "" : s.err().message));
  REQUIRE(s.ok());
  CHECK(s->workload.requests == 10);
  CHECK(s->workload.draw == workload_spec::sampling::mixed);
  CHECK(s->workload.stream == workload_spec::streaming::mixed);
  REQUIRE(s->faults.size() == 9);
  CHECK(s->faults[0].time.when == fault_time::kind::at);
  CHECK(s->faults[0].time.ms == 1500);
  CHECK(s->faults[1].action == fault_spec::kind::restart);
  CHECK(s->faults[1].time.when == fault_time::kind::after);
  CHECK(s->faults[2].target.what == fault_target::kind::coordinator);
  CHECK(s->faults[2].for_ms == 3000);
  CHECK(s->faults[3].time.when == fault_time::kind::migration);
  CHECK(s->faults[3].target.what == fault_target::kind::role);
  CHECK(s->faults[4].time.from_ms == 1000);
  CHECK(s->faults[4].time.to_ms == 4000);
  CHECK(s->faults[4].plane == "data");
  CHECK(s->faults[5].drop == Approx(0.1));
  CHECK(s->faults[5].delay_ms == 5);
  CHECK(s->faults[6].disk_slow_ms == 20);
  CHECK(s->faults[7].action == fault_spec::kind::term);
  CHECK(s->faults[8].replan_seed == 4);
  CHECK(s->checks.errors_allowed == 2);
  CHECK(s->checks.detect_ms == 500);
  CHECK(s->checks.exit_ms == 8000);
  CHECK(node_names(*s) == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(describe(s->faults[0]) == "kill node n1");
}

TEST_CASE("scenario errors name the field and what to write", "[chaos]") {
  const std::string base = three_nodes;
  CHECK_THAT(parse_error(base + "faults: [{at: soon, kill: {node: n1}}]\n"),
             Catch::Contains("faults[0].at") && Catch::Contains("{tokens: N}"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s}]\n"), Catch::Contains("exactly one of"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, kill: {node: n1}, stop: {node: n2}}]\n"),
             Catch::Contains("exactly one of"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, kill: {node: n9}}]\n"),
             Catch::Contains("node 'n9'"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, kill: {role: chef}}]\n"),
             Catch::Contains("faults[0].kill.role"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, partition: {node: n1, from: n2}}]\n"),
             Catch::Contains("plane: data"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, stop: {role: decode}}]\n"),
             Catch::Contains("stops a process"));
  CHECK_THAT(parse_error(base + "faults: [{at: 1s, network: {node: n1, drop: 2}}]\n"),
             Catch::Contains("at most 1"));
  CHECK_THAT(parse_error(base + "faults: [{at: {random: [5s, 1s]}, kill: {node: n1}}]\n"),
             Catch::Contains("FROM <= TO"));
  CHECK_THAT(parse_error(base + "workload: {requets: 3}\n"),
             Catch::Contains("'workload.requets' is not a known field"));
  CHECK_THAT(parse_error(base + "workload: {sampling: hot}\n"),
             Catch::Contains("'workload.sampling' must be one of greedy, seeded, mixed"));
  CHECK_THAT(parse_error("topology: {nodes: 2, manifest: {}}\n"),
             Catch::Contains("'name' is missing"));
  CHECK_THAT(
      parse_error("name: x\ntopology: {manifest: {roles: {decode: {count: 0}}}, nodes: 2}\n"),
      Catch::Contains("topology.manifest") && Catch::Contains("one decode worker"));
  CHECK_THAT(parse_error("name: x\ntopology: {manifest: {}}\n"), Catch::Contains("no nodes"));
}

TEST_CASE("the runner's manifest names every node at its address, with the key and model",
          "[chaos]") {
  auto s = parse_scenario(three_nodes, "s.yaml", ".");
  REQUIRE(s.ok());
  std::string yaml;
  auto m =
      complete_manifest(*s, "/models/m", {"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"},
                        "/tmp/secret", "k", &yaml);
  INFO(yaml);
  REQUIRE(m.ok());
  REQUIRE(m->nodes.size() == 3);
  CHECK(m->nodes[1].address == "127.0.0.1:1002");
  CHECK(m->nodes[1].decode == 1);
  CHECK(m->model == "/models/m");
  CHECK(m->api_keys == std::vector<serve::api_key>{{"k", ""}});
  CHECK(m->experts.count == 5);
  // Without nodes listed, the roles are spread over n1..nN, each node holding some.
  auto spread = parse_scenario(R"(
name: s
topology:
  nodes: 3
  manifest: {roles: {prefill: {count: 1}, decode: {count: 2}, expert_shard: {count: 4}}}
)",
                               "s.yaml", ".");
  REQUIRE(spread.ok());
  auto m2 = complete_manifest(*spread, "/m", {"a:1", "a:2", "a:3"}, "/s", "k", nullptr);
  REQUIRE(m2.ok());
  CHECK(m2->prefill.count == 1);
  CHECK(m2->decode.count == 2);
  CHECK(m2->experts.count == 4);
  for (const auto& n : m2->nodes)
    CHECK(n.prefill + n.decode + n.expert_shards > 0);
}

TEST_CASE("random scenarios: the same seed draws the same, each a valid topology", "[chaos]") {
  std::set<std::string> distinct;
  for (int i = 0; i < 50; ++i) {
    const scenario a = random_scenario(7, i);
    const scenario b = random_scenario(7, i);
    CHECK(a.topology.manifest_yaml == b.topology.manifest_yaml);
    REQUIRE(a.faults.size() == b.faults.size());
    REQUIRE_FALSE(a.faults.empty());
    distinct.insert(a.topology.manifest_yaml);
    const auto names = node_names(a);
    CHECK(names.size() >= 2);
    CHECK(names.size() <= 4);
    std::vector<std::string> addresses;
    for (size_t n = 0; n < names.size(); ++n)
      addresses.push_back("127.0.0.1:" + std::to_string(2000 + n));
    auto m = complete_manifest(a, "/m", addresses, "/s", "k", nullptr);
    INFO(a.topology.manifest_yaml);
    REQUIRE(m.ok());
  }
  CHECK(distinct.size() > 20);
  CHECK(random_scenario(7, 0).topology.manifest_yaml !=
        random_scenario(8, 0).topology.manifest_yaml);
}

TEST_CASE("every scenario of the library parses", "[chaos]") {
  const std::string dir = std::string(BRIGADE_SOURCE_DIR) + "/deploy/scenarios";
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  int count = 0;
  std::set<fault_spec::kind> kinds;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.substr(name.size() - 5) != ".yaml") continue;
    auto s = load_scenario(dir + "/" + name);
    INFO(name << ": " << (s.ok() ? "" : s.err().message));
    REQUIRE(s.ok());
    for (const auto& f : s->faults)
      kinds.insert(f.action);
    ++count;
  }
  closedir(d);
  CHECK(count >= 12);
  // The library covers every kind of fault.
  CHECK(kinds.size() == 8);
}

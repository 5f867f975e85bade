// A role's device: `cpu` or `cuda:N`, per role kind and per node, the node's word winning; bad
// values refused at parse time naming the field, the value and the forms; a device that is absent
// or too small refused before anything loads, naming the role, its node, the device and what was
// found (a fake device report stands in for a GPU, so that these run on any machine).
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>

#include "actors/model_context.hpp"
#include "actors/role_spawner.hpp"
#include "actors/shard_set.hpp"
#include "actors/spawn_checks.hpp"
#include "config/manifest.hpp"
#include "config/role_placement.hpp"
#include "deploy/device_check.hpp"
#include "deploy/topology.hpp"
#include "gpu/device_choice.hpp"
#include "kvcache/hash_key.hpp"
#include "model/config.hpp"

using namespace brigade;
using actors::role_kind;

namespace {

const std::string default_model = std::string(BRIGADE_SOURCE_DIR) + "/models/default/target";

config::manifest parse(const std::string& yaml) {
  auto m = config::parse_manifest(yaml, "m.yaml");
  INFO((m.ok() ? std::string() : m.err().message));
  REQUIRE(m.ok());
  return m.value();
}

std::string parse_error(const std::string& yaml) {
  auto m = config::parse_manifest(yaml, "m.yaml");
  REQUIRE_FALSE(m.ok());
  return m.err().message;
}

// One H200-like device of `bytes`, as probe_cuda() would report it.
gpu::device_report one_device(uint64_t bytes) {
  gpu::device_report r;
  r.built_with_cuda = true;
  r.devices.push_back({0, "Fake GPU", 9, 0, static_cast<size_t>(bytes)});
  return r;
}

gpu::device_report no_device() {
  gpu::device_report r;
  r.built_with_cuda = true;
  r.reason = "the CUDA driver reports no devices";
  return r;
}

// Whether this machine has a CUDA device 0: then the refusals of an absent device cannot be seen.
bool cuda_device_here() {
  const gpu::device_report r = gpu::probe_cuda();
  if (r.count() == 0) return false;
  WARN("skipped: this machine has a CUDA device (" + r.describe() +
       "), so a role asking for cuda:0 is not refused here; the fake reports above cover it");
  return true;
}

}  // namespace

TEST_CASE("devices parse as cpu or cuda:N, anything else is refused naming the forms", "[device]") {
  for (const auto& [text, cuda, ordinal] :
       std::vector<std::tuple<std::string, bool, int>>{{"cpu", false, 0},
                                                       {"cuda:0", true, 0},
                                                       {"cuda:7", true, 7},
                                                       {"cuda:1023", true, 1023}}) {
    auto d = gpu::parse_device(text, "--device");
    REQUIRE(d.ok());
    CHECK(d->cuda == cuda);
    CHECK(d->ordinal == ordinal);
    CHECK(d->to_string() == text);
  }
  for (const std::string bad :
       {"cuda:", "cuda:-1", "gpu0", "cuda:x", "CPU", "cuda", "cuda:1024", "cuda:0 ", "", "0"}) {
    auto d = gpu::parse_device(bad, "--device");
    REQUIRE_FALSE(d.ok());
    CHECK(d.err().message == "field '--device' is '" + bad +
                                 "'; it must be cpu or cuda:N, N a CUDA device ordinal "
                                 "such as cuda:0");
  }
}

TEST_CASE("bad device values in a manifest name the field, the value and the forms",
          "[device][manifest]") {
  for (const std::string bad : {"\"cuda:\"", "cuda:-1", "gpu0", "cuda:x"}) {
    const std::string value = bad == "\"cuda:\"" ? "cuda:" : bad;
    CHECK(parse_error("model: x\nroles:\n  decode: {count: 1, device: " + bad + "}\n") ==
          "m.yaml: field 'roles.decode.device' is '" + value +
              "'; it must be cpu or cuda:N, N a CUDA device ordinal such as cuda:0");
  }
  CHECK_THAT(parse_error("model: x\nroles:\n  expert_shard:\n    device: [cuda:0]\n"),
             Catch::Contains("field 'roles.expert_shard.device' is 'a list'"));
  const std::string nodes = R"(
model: x
join_secret_file: /s
nodes:
  - {name: a, address: "h:1", roles: {prefill: 1, decode: 1, expert_shard: 1}, device: )";
  CHECK_THAT(parse_error(nodes + "gpu0}\n"),
             Catch::Contains("field 'nodes[0].device' is 'gpu0'; it must be cpu or cuda:N"));
  CHECK_THAT(parse_error(nodes + "{decode: cuda:x}}\n"),
             Catch::Contains("field 'nodes[0].device.decode' is 'cuda:x'"));
  CHECK_THAT(parse_error(nodes + "{decoder: cuda:0}}\n"), Catch::Contains("decoder"));
}

TEST_CASE("devices default to cpu and follow the role kind without nodes", "[device][manifest]") {
  config::manifest plain = parse("model: x\n");
  for (const auto& p : config::place(plain))
    CHECK(p.device == gpu::device_choice{});
  config::manifest m = parse(R"(
model: x
roles:
  prefill: {count: 1, device: cuda:1}
  decode: {count: 2, device: cuda:0}
  expert_shard: {count: 2}
)");
  for (const auto& p : config::place(m)) {
    INFO(p.name);
    const std::string want = p.role == role_kind::prefill  ? "cuda:1"
                             : p.role == role_kind::decode ? "cuda:0"
                                                           : "cpu";
    CHECK(p.device.to_string() == want);
  }
  CHECK_THAT(config::describe_placement(m),
             Catch::Contains("expert_shard-0 expert_shard-1 decode-0@cuda:0 decode-1@cuda:0 "
                             "prefill-0@cuda:1"));
}

TEST_CASE("a node's device wins over the role kind's, its per-kind device over its own",
          "[device][manifest]") {
  config::manifest m = parse(R"(
model: x
join_secret_file: /s
roles:
  decode: {device: cuda:0}
  expert_shard: {device: cuda:0}
nodes:
  - {name: plain, address: "h:1", roles: {prefill: 1, decode: 1, expert_shard: 1}}
  - {name: cpu-box, address: "h:2", roles: {decode: 1, expert_shard: 1}, device: cpu}
  - {name: two-gpus, address: "h:3", roles: {prefill: 1, expert_shard: 1},
     device: {prefill: cuda:1}}
  - {name: mixed, address: "h:4", roles: {decode: 1, expert_shard: 1},
     device: {expert_shard: cuda:3}}
)");
  auto device = [&](role_kind role, const std::string& node) {
    return config::device_for(m, role, node).to_string();
  };
  CHECK(device(role_kind::decode, "plain") == "cuda:0");
  CHECK(device(role_kind::prefill, "plain") == "cpu");
  CHECK(device(role_kind::decode, "cpu-box") == "cpu");
  CHECK(device(role_kind::expert_shard, "cpu-box") == "cpu");
  CHECK(device(role_kind::prefill, "two-gpus") == "cuda:1");
  CHECK(device(role_kind::expert_shard, "two-gpus") == "cuda:0");
  CHECK(device(role_kind::expert_shard, "mixed") == "cuda:3");
  CHECK(device(role_kind::decode, "mixed") == "cuda:0");
  CHECK(device(role_kind::kv_store, "mixed") == "cpu");
  for (const auto& p : config::place(m))
    CHECK(p.device == config::device_for(m, p.role, p.node));
  auto three =
      config::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/three-nodes.yaml");
  REQUIRE(three.ok());
  CHECK(config::device_for(three.value(), role_kind::expert_shard, "gpu-1").to_string() ==
        "cuda:1");
  CHECK(config::device_for(three.value(), role_kind::expert_shard, "gpu-2").to_string() ==
        "cuda:0");
  auto one_gpu =
      config::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/one-gpu.yaml");
  REQUIRE(one_gpu.ok());
  for (const auto& p : config::place(one_gpu.value()))
    CHECK(p.device.to_string() == "cuda:0");
}

TEST_CASE("an absent device is refused naming who asked, the device and what was found",
          "[device]") {
  const gpu::device_choice cuda0{true, 0}, cuda2{true, 2};
  CHECK(gpu::check_device_present({}, no_device(), "decode-0").ok());
  CHECK(gpu::check_device_present(cuda0, one_device(1 << 30), "decode-0").ok());
  status none = gpu::check_device_present(cuda0, no_device(), "decode-0 (decode on node local)");
  REQUIRE_FALSE(none.ok());
  CHECK(none.err().message ==
        "decode-0 (decode on node local) asks for device cuda:0, but this machine has no CUDA "
        "device (the CUDA driver reports no devices): use device cpu (--device cpu), or run on "
        "a machine with that CUDA device");
  status out_of_range = gpu::check_device_present(cuda2, one_device(1 << 30), "prefill-0");
  REQUIRE_FALSE(out_of_range.ok());
  CHECK_THAT(out_of_range.err().message,
             Catch::Contains("prefill-0 asks for device cuda:2, but there is no CUDA device 2 "
                             "(1 CUDA device(s): [0] Fake GPU (sm_90, 1 GiB))"));
  gpu::device_report unbuilt;
  unbuilt.reason = "built without CUDA";
  CHECK_THAT(gpu::check_device_present(cuda0, unbuilt, "--device").err().message,
             Catch::Contains("no CUDA device (built without CUDA)"));
}

TEST_CASE("a device too small for its roles is refused naming them, the bytes and the device's",
          "[device]") {
  const gpu::device_choice cuda0{true, 0};
  status fits = gpu::check_device_memory({{"weights", 100}, {"decode-0", 50}}, 150, cuda0, "G");
  CHECK(fits.ok());
  status small = gpu::check_device_memory({{"weights", 100}, {"decode-0", 51}}, 150, cuda0, "G");
  REQUIRE_FALSE(small.ok());
  CHECK(small.err().code == errc::resource_exhausted);
  CHECK(small.err().message ==
        "device cuda:0 (G) has 0.0 GiB (150 bytes) of memory, but what runs on it needs 0.0 GiB "
        "(151 bytes): weights 0.0 GiB (100 bytes); decode-0 0.0 GiB (51 bytes); lower kv_tokens "
        "or the expert slots, or spread the roles over more devices");
}

TEST_CASE("the roles of a one-process manifest are checked against the devices found", "[device]") {
  auto c = model::load_config(default_model);
  REQUIRE(c.ok());
  config::manifest m = parse("model: " + default_model + R"(
roles:
  prefill: {count: 1, kv_tokens: 1024}
  decode: {count: 2, kv_tokens: 4096, device: cuda:0}
  expert_shard: {count: 4, slots_per_shard: 5, device: cuda:0}
)");
  auto layout = actors::initial_layout(c.value(), 4, 5);
  REQUIRE(layout.ok());
  status absent = deploy::check_local_devices(m, c.value(), layout.value(), 4, no_device());
  REQUIRE_FALSE(absent.ok());
  CHECK_THAT(absent.err().message,
             Catch::StartsWith("m.yaml: expert_shard-0 (expert_shard on node local) asks for "
                               "device cuda:0, but this machine has no CUDA device"));
  CHECK(deploy::check_local_devices(m, c.value(), layout.value(), 4, one_device(1ull << 40)).ok());
  // Two decode workers' KV for 4096 tokens each alone pass 1 MiB.
  status small = deploy::check_local_devices(m, c.value(), layout.value(), 4, one_device(1 << 20));
  REQUIRE_FALSE(small.ok());
  const std::string& why = small.err().message;
  CHECK_THAT(why, Catch::StartsWith("m.yaml: device cuda:0 (Fake GPU) has 0.0 GiB (1048576 "
                                    "bytes) of memory, but what runs on it needs"));
  CHECK_THAT(why,
             Catch::Contains("decode-1 (decode on node local) KV for 4096 tokens " +
                             gpu::describe_bytes(actors::kv_storage_bytes(c.value(), 4096, 16))));
  CHECK_THAT(why, Catch::Contains("expert_shard-3 (expert_shard on node local) " +
                                  std::to_string(5 * c->moe_layers().size()) + " expert slots"));
  CHECK_THAT(why, !Catch::Contains("prefill-0"));
}

TEST_CASE("serve refuses a manifest whose device is absent, before loading the weights",
          "[device]") {
  if (cuda_device_here()) return;
  auto m = config::load_manifest(std::string(BRIGADE_SOURCE_DIR) + "/deploy/examples/one-gpu.yaml");
  REQUIRE(m.ok());
  m->model = default_model;
  auto topo = deploy::topology::start(m.value());
  REQUIRE_FALSE(topo.ok());
  CHECK_THAT(topo.err().message,
             Catch::Contains("expert_shard-0 (expert_shard on node local) asks for device "
                             "cuda:0, but this machine has no CUDA device (" +
                             gpu::probe_cuda().reason + ")"));
}

TEST_CASE("a node refuses to spawn a role on an absent device, naming the role and the node",
          "[device]") {
  if (cuda_device_here()) return;
  auto ctx = actors::model_context::load_config(default_model, kvcache::random_hash_key());
  REQUIRE(ctx.ok());
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  actors::role_spec spec;
  actors::decode_worker_config decode;
  decode.name = "decode-3";
  spec.config = decode;
  spec.device = "cuda:0";
  auto spawned = actors::spawn_role(sys, ctx.value(), spec, "gpu-2");
  REQUIRE_FALSE(spawned.ok());
  CHECK_THAT(spawned.err().message,
             Catch::StartsWith("decode-3 (decode on node gpu-2) asks for device cuda:0, but this "
                               "machine has no CUDA device"));
  spec.device = "cuda:x";
  spawned = actors::spawn_role(sys, ctx.value(), spec, "gpu-2");
  REQUIRE_FALSE(spawned.ok());
  CHECK_THAT(spawned.err().message, Catch::Contains("decode-3.device' is 'cuda:x'"));
}

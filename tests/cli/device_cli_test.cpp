// `--device` on `brigade generate` and `brigade serve`, run the way a user does: cpu gives the
// output of no flag, byte for byte; a CUDA device this machine lacks ends the command at once,
// saying what was found and what to do; a malformed value names the option and the forms.
#include <catch2/catch.hpp>
#include <string>

#include "gpu/device_probe.hpp"
#include "tests/support/run_brigade.hpp"

using brigade::testing::run_brigade;

namespace {

const std::string model = std::string(BRIGADE_SOURCE_DIR) + "/models/default/target";
const std::string generate =
    "generate --model " + model + " --prompt 'To open a file, use' --max-tokens 12 --json";

// The refusals of cuda:0 need a machine without one; with a device they would run instead.
bool cuda_device_here() {
  const brigade::gpu::device_report r = brigade::gpu::probe_cuda();
  if (r.count() == 0) return false;
  WARN("skipped: this machine has a CUDA device (" + r.describe() +
       "), so --device cuda:0 runs rather than being refused; scripts/gpu-check.sh compares it");
  return true;
}

}  // namespace

TEST_CASE("generate --device cpu prints what generate prints without it", "[cli][device]") {
  const auto plain = run_brigade(generate);
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  const auto cpu = run_brigade(generate + " --device cpu");
  INFO(cpu.err);
  REQUIRE(cpu.exit_code == 0);
  CHECK(cpu.out == plain.out);
  CHECK(plain.out.find("\"ids\"") != std::string::npos);
}

TEST_CASE("generate --device cuda:0 without a CUDA device fails saying what to do",
          "[cli][device]") {
  if (cuda_device_here()) return;
  const auto r = run_brigade(generate + " --device cuda:0");
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("brigade generate: --device asks for device cuda:0, but this "
                                    "machine has no CUDA device (" +
                                    brigade::gpu::probe_cuda().reason + ")"));
  CHECK_THAT(r.err, Catch::Contains("use device cpu (--device cpu), or run on a machine with "
                                    "that CUDA device"));
}

TEST_CASE("a malformed --device is refused naming the option and the forms", "[cli][device]") {
  for (const std::string bad : {"gpu0", "cuda:", "cuda:-1", "cuda:x"}) {
    const auto r = run_brigade(generate + " --device " + bad);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("field '--device' is '" + bad +
                                      "'; it must be cpu or cuda:N, N a CUDA device ordinal"));
  }
}

TEST_CASE("serve refuses a CUDA device this machine lacks at start, engine or topology",
          "[cli][device]") {
  if (cuda_device_here()) return;
  const auto engine =
      run_brigade("serve --engine --model " + model + " --listen 127.0.0.1:0 --device cuda:0");
  CHECK(engine.exit_code != 0);
  CHECK_THAT(engine.err, Catch::Contains("brigade serve: serve --engine asks for device cuda:0, "
                                         "but this machine has no CUDA device"));
  const auto topology =
      run_brigade("serve " + std::string(BRIGADE_SOURCE_DIR) +
                  "/deploy/examples/one-gpu.yaml --model " + model + " --listen 127.0.0.1:0");
  CHECK(topology.exit_code != 0);
  CHECK_THAT(topology.err,
             Catch::Contains("one-gpu.yaml: expert_shard-0 (expert_shard on node local) asks "
                             "for device cuda:0, but this machine has no CUDA device"));
  // Without --engine, --device puts every role of the (embedded default) topology there.
  const auto every_role =
      run_brigade("serve --model " + model + " --listen 127.0.0.1:0 --device cuda:0");
  CHECK(every_role.exit_code != 0);
  CHECK_THAT(every_role.err, Catch::Contains("expert_shard-0 (expert_shard on node local) asks "
                                             "for device cuda:0, but this machine has no CUDA "
                                             "device"));
  const auto bad = run_brigade("serve --engine --model " + model + " --device gpu0");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("field '--device' is 'gpu0'"));
}

TEST_CASE("generate runs with a bf16 KV cache and refuses a bad --kv-dtype naming the value",
          "[cli][kv_dtype]") {
  const auto half = run_brigade(generate + " --kv-dtype bf16");
  INFO(half.err);
  REQUIRE(half.exit_code == 0);
  CHECK(half.out.find("\"ids\"") != std::string::npos);
  const auto bad = run_brigade(generate + " --kv-dtype f16");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("--kv-dtype is 'f16', not one of f32, bf16"));
  const auto serve_bad =
      run_brigade("serve --engine --model " + model + " --listen 127.0.0.1:0 --kv-dtype q8");
  CHECK(serve_bad.exit_code != 0);
  CHECK_THAT(serve_bad.err, Catch::Contains("--kv-dtype is 'q8', not one of f32, bf16"));
}

TEST_CASE("a bf16 KV cache on a CUDA device is taken: only a missing device is refused",
          "[cli][kv_dtype]") {
  // Both backends keep bf16 KV; here the only refusal left is the device itself.
  if (cuda_device_here()) return;
  const auto gen = run_brigade(generate + " --device cuda:0 --kv-dtype bf16");
  CHECK(gen.exit_code != 0);
  CHECK_THAT(gen.err, Catch::Contains("asks for device cuda:0, but this machine has no CUDA"));
  CHECK_THAT(gen.err, !Catch::Contains("kv"));
  const auto serve = run_brigade("serve --model " + model +
                                 " --listen 127.0.0.1:0 --device cuda:0 --kv-dtype bf16");
  CHECK(serve.exit_code != 0);
  CHECK_THAT(serve.err, Catch::Contains("asks for device cuda:0, but this machine has no CUDA"));
  CHECK_THAT(serve.err, !Catch::Contains("kv_dtype"));
}

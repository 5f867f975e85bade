// Runs `brigade bench engine` the way a user does, briefly: --device cpu as before, --device
// cuda:N refused at start on a machine without that device, and the options that do not mix.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "gpu/device_probe.hpp"
#include "tests/support/run_brigade.hpp"

using brigade::testing::run_brigade;

namespace {

const std::string work_dir = std::string(BRIGADE_BINARY_DIR) + "/bench_engine_cli_work";

// The refusals of cuda:0 need a machine without one; with a device the benchmark would run.
bool cuda_device_here() {
  const brigade::gpu::device_report r = brigade::gpu::probe_cuda();
  if (r.count() == 0) return false;
  WARN("skipped: this machine has a CUDA device (" + r.describe() +
       "), so bench engine --device cuda:0 runs; scripts/gpu-check.sh runs it");
  return true;
}

}  // namespace

TEST_CASE("bench engine --device cpu --json reports prefill, decode and the CPU bound",
          "[bench][cli]") {
  const auto r = run_brigade("bench engine --quick --json --device cpu --work-dir " + work_dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("prefill_tokens_per_s").get<double>() > 0);
  for (const char* batch : {"1", "8", "32"})
    CHECK(doc.at("decode_tokens_per_s").at(batch).get<double>() > 0);
  CHECK(doc.at("decode_batch1_bound_tokens_per_s").get<double>() > 0);
  CHECK(doc.at("active_weight_bytes_per_token").get<double>() > 0);
  CHECK_FALSE(doc.at("kernel_path").get<std::string>().empty());
  CHECK(doc.count("device") == 0);
}

TEST_CASE("bench engine --model measures a checkpoint of the user's on the cpu", "[bench][cli]") {
  const std::string model = work_dir + "/make-model-olmoe";
  const auto made = run_brigade("make-model --family olmoe --out " + model);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto r = run_brigade("bench engine --quick --json --model " + model);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("model").at("experts") == 16);
  CHECK(doc.at("model").at("dtype") == "BF16");
  CHECK(doc.at("prefill_tokens_per_s").get<double>() > 0);
  const auto both = run_brigade("bench engine --model " + model + " --shape wide");
  CHECK(both.exit_code != 0);
  CHECK_THAT(both.err, Catch::Contains("--shape excludes --model"));
}

TEST_CASE("bench engine --device cuda:0 without a CUDA device is refused before any work",
          "[bench][cli][device]") {
  if (cuda_device_here()) return;
  const std::string fresh = work_dir + "/refused";
  std::filesystem::remove_all(fresh);
  const auto r = run_brigade("bench engine --device cuda:0 --json --work-dir " + fresh);
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("brigade bench engine: --device asks for device cuda:0, but "
                                    "this machine has no CUDA device (" +
                                    brigade::gpu::probe_cuda().reason + ")"));
  CHECK_THAT(r.err, Catch::Contains("use device cpu (--device cpu), or run on a machine with "
                                    "that CUDA device"));
  // Refused at start: no benchmark model was written.
  CHECK_FALSE(std::filesystem::exists(fresh));
}

TEST_CASE("bench engine refuses options that do not fit its device", "[bench][cli][device]") {
  const auto bad = run_brigade("bench engine --device gpu0");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("field '--device' is 'gpu0'; it must be cpu or cuda:N"));
  const auto kernels = run_brigade("bench engine --device cuda:0 --compare-paths");
  CHECK(kernels.exit_code != 0);
  CHECK_THAT(kernels.err, Catch::Contains("--compare-paths measures the CPU kernels; it runs with "
                                          "--device cpu, not cuda:0"));
  const auto bounds = run_brigade("bench engine --bandwidth-gbs 3350");
  CHECK(bounds.exit_code != 0);
  CHECK_THAT(bounds.err, Catch::Contains("--bandwidth-gbs and --peak-tflops are the bounds of "
                                         "--device cuda:N"));
  const auto negative = run_brigade("bench engine --device cuda:0 --peak-tflops -1");
  CHECK(negative.exit_code != 0);
}

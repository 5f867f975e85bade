// Whole forward steps of small generated models on CUDA: greedy generation through the engine
// must give the CPU engine's tokens (logits a float rounding apart), and on the GPU a sequence's
// logits must be bit-identical whether it runs alone or batched with others.
#include <unistd.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/engine.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace brigade;
using namespace brigade::gpu::test;

namespace {

struct family_case {
  const char* family;
  const char* dtype;
  const char* config_edit_from;  ///< Replaced in config.json to switch a feature on.
  const char* config_edit_to;
};

const family_case families[] = {
    {"qwen3_moe", "bfloat16", nullptr, nullptr},
    {"qwen2_moe", "float32", nullptr, nullptr},
    {"mixtral", "float16", "\"sliding_window\": null", "\"sliding_window\": 6"},
    {"olmoe", "bfloat16", "\"clip_qkv\": null", "\"clip_qkv\": 0.5"},
    {"deepseek_v3", "bfloat16", nullptr, nullptr},
};

// Models go under the system's temporary directory, one folder per process (ctest may run the
// cases at the same time), removed when the process exits.
std::string scratch_root() {
  struct scratch {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("brigade-cuda-tests-" + std::to_string(::getpid()));
    ~scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const scratch root;
  return root.path.string();
}

// Each test case writes its own directory.
std::string write_model(const family_case& f, uint64_t seed, const std::string& tag) {
  model::model_spec spec;
  spec.family = f.family;
  spec.dtype = f.dtype;
  spec.layers = 3;
  spec.hidden = 128;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 32;
  spec.experts = 8;
  spec.top_k = 2;
  spec.moe_inter = 64;
  spec.dense_inter = 128;
  spec.vocab = 512;
  spec.max_positions = 512;
  spec.seed = seed;
  if (spec.family == "qwen3_moe") spec.mlp_only_layers = {1};
  if (spec.family == "deepseek_v3") {  // the grouped, biased, scaled sigmoid router
    spec.groups = 4;
    spec.top_groups = 2;
    spec.routed_scaling = 2.5f;
    spec.q_lora_rank = 48;
  }
  const std::string dir = scratch_root() + "/" + tag + "-" + f.family;
  std::filesystem::create_directories(dir);
  const status written = model::write_random_model(spec, dir);
  INFO(dir);
  REQUIRE(written.ok());
  if (f.config_edit_from) {
    std::ifstream in(dir + "/config.json");
    std::stringstream text;
    text << in.rdbuf();
    std::string config = text.str();
    const size_t at = config.find(f.config_edit_from);
    REQUIRE(at != std::string::npos);
    config.replace(at, std::strlen(f.config_edit_from), f.config_edit_to);
    std::ofstream(dir + "/config.json") << config;
  }
  return dir;
}

std::vector<std::vector<int32_t>> prompts(std::mt19937& rng, int vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int len : {5, 17, 33}) {
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (int32_t& t : p)
      t = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
    out.push_back(p);
  }
  return out;
}

struct generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  ///< One vocab row per generated token.
};

// Small blocks and a small step budget: prefill is chunked and mixed with decode steps.
model::engine_options small_engine(gpu::dtype kv = gpu::dtype::f32) {
  model::engine_options o;
  o.kv_dtype = kv;
  o.block_tokens = 4;
  o.kv_tokens = 1024;
  o.max_step_tokens = 16;
  o.max_running = 8;
  return o;
}

// Greedy generation of `max_tokens` for each prompt, all submitted together when `together`,
// else one engine run per prompt.
std::vector<generation> generate(const model::loaded_model& m, gpu::backend& dev,
                                 const std::vector<std::vector<int32_t>>& ps, bool together,
                                 gpu::dtype kv = gpu::dtype::f32) {
  model::request_options r;
  r.max_tokens = 8;
  r.keep_logits = true;
  std::vector<generation> out;
  auto run = [&](const std::vector<std::vector<int32_t>>& batch) {
    model::engine e(m, dev, small_engine(kv));
    std::vector<int64_t> ids;
    for (const auto& p : batch) {
      auto id = e.submit(p, r);
      REQUIRE(id.ok());
      ids.push_back(id.value());
    }
    e.run_until_idle();
    for (int64_t id : ids)
      out.push_back({e.output(id), e.kept_logits(id)});
  };
  if (together) {
    run(ps);
  } else {
    for (const auto& p : ps)
      run({p});
  }
  return out;
}

// Tokens must match while the logits are close; a different token is accepted only where the
// CPU's top two logits are nearer than twice the observed difference (a rounding tie), and
// then the sequences diverge, so comparison stops.
void require_same_greedy(const generation& cpu, const generation& gpu, int vocab) {
  REQUIRE(cpu.tokens.size() == gpu.tokens.size());
  for (size_t s = 0; s < cpu.tokens.size(); ++s) {
    const float* c = cpu.logits.data() + s * static_cast<size_t>(vocab);
    const float* g = gpu.logits.data() + s * static_cast<size_t>(vocab);
    float diff = 0.0f, scale = 1.0f;
    for (int i = 0; i < vocab; ++i) {
      const float d = std::fabs(c[i] - g[i]);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
      scale = std::max(scale, std::fabs(c[i]));
    }
    INFO("token " << s << ": max logit difference " << diff << " at logit scale " << scale);
    REQUIRE(diff <= 1e-3f * scale);
    if (cpu.tokens[s] == gpu.tokens[s]) continue;
    std::vector<float> sorted(c, c + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const float margin = sorted[0] - sorted[1];
    INFO("CPU chose " << cpu.tokens[s] << ", GPU " << gpu.tokens[s] << ", CPU margin " << margin);
    REQUIRE(margin <= 2 * diff);
    WARN("greedy tie within rounding at token " << s << "; the sequences diverge after it");
    return;
  }
}

// For every family: the device engine's greedy tokens against the CPU engine's, both with a KV
// cache of `kv`, on models written from seeds `seed`, `seed` + 1, ...
void require_greedy_like_cpu(gpu::backend& device, uint64_t seed, const std::string& tag,
                             gpu::dtype kv) {
  auto cpu = gpu::make_cpu_backend();
  for (const family_case& f : families) {
    INFO(f.family << " " << f.dtype << ", model seed " << seed << ", KV " << gpu::dtype_name(kv));
    const std::string dir = write_model(f, seed, tag);
    auto cpu_model = model::loaded_model::load(dir, *cpu, true);
    auto gpu_model = model::loaded_model::load(dir, device, true);
    REQUIRE(cpu_model.ok());
    REQUIRE(gpu_model.ok());
    std::mt19937 rng(static_cast<uint32_t>(seed++));
    const auto ps = prompts(rng, cpu_model.value()->config.vocab_size);
    const auto want = generate(*cpu_model.value(), *cpu, ps, true, kv);
    const auto got = generate(*gpu_model.value(), device, ps, true, kv);
    for (size_t i = 0; i < ps.size(); ++i) {
      INFO("prompt " << i << " of " << ps[i].size() << " tokens");
      require_same_greedy(want[i], got[i], cpu_model.value()->config.vocab_size);
    }
  }
}

}  // namespace

TEST_CASE("cuda engine generates the CPU engine's greedy tokens for every family", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  require_greedy_like_cpu(*gpu, 1300, "greedy", gpu::dtype::f32);
}

TEST_CASE("cuda engine with a bf16 KV cache generates the CPU engine's bf16-KV greedy tokens",
          "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  require_greedy_like_cpu(*gpu, 1500, "greedy_bf16_kv", gpu::dtype::bf16);
}

TEST_CASE("cuda engine logits are bit-identical alone and batched", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(gpu);
  uint64_t seed = 1400;
  for (const family_case& f : families) {
    INFO(f.family << " " << f.dtype << ", model seed " << seed);
    const std::string dir = write_model(f, seed, "invariance");
    auto m = model::loaded_model::load(dir, *gpu, true);
    REQUIRE(m.ok());
    std::mt19937 rng(static_cast<uint32_t>(seed++));
    const auto ps = prompts(rng, m.value()->config.vocab_size);
    const auto alone = generate(*m.value(), *gpu, ps, false);
    const auto together = generate(*m.value(), *gpu, ps, true);
    for (size_t i = 0; i < ps.size(); ++i) {
      INFO("prompt " << i);
      REQUIRE(alone[i].tokens == together[i].tokens);
      REQUIRE(alone[i].logits.size() == together[i].logits.size());
      REQUIRE(std::memcmp(alone[i].logits.data(), together[i].logits.data(),
                          sizeof(float) * alone[i].logits.size()) == 0);
    }
  }
}

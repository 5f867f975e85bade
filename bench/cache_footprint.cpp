#include "bench/cache_footprint.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/cache_requests.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "gpu/backend.hpp"
#include "model/config.hpp"
#include "model/engine.hpp"
#include "model/kv_layout.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {
namespace {

// The two models share layers, hidden size, heads, experts and vocabulary; attention differs.
// The MLA shape scales DeepSeek-V3's (hidden 7168, 128 heads of 128 + 64, latent 512, low-rank
// query 1536) down to the bench model's width.
model::model_spec spec_of(const std::string& family, const kv_footprint_options& o) {
  model::model_spec s;
  s.family = family;
  s.layers = o.layers;
  s.hidden = o.hidden;
  s.heads = o.hidden / 64;
  s.kv_heads = std::max(1, o.hidden / 256);
  s.head_dim = 64;
  s.experts = 8;
  s.top_k = 2;
  s.moe_inter = o.moe_inter;
  s.vocab = 2048;
  s.max_positions = 2 * o.prompt_tokens + 64;
  s.seed = 23;
  if (family == "deepseek_v3") {
    s.q_lora_rank = o.hidden / 4;
    s.kv_lora_rank = o.hidden / 8;
    s.qk_nope_head_dim = 64;
    s.qk_rope_head_dim = 32;
    s.v_head_dim = 64;
    s.shared_experts = 0;
    s.first_dense = 0;
    s.routed_scaling = 1.0;
  }
  return s;
}

struct model_dir {
  std::filesystem::path path;
  ~model_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

result<nlohmann::json> measure_one(const std::string& family, gpu::dtype kv_dtype,
                                   const kv_footprint_options& o) {
  model_dir dir{std::filesystem::temp_directory_path() /
                ("brigade-bench-footprint-" + family + "-" + std::to_string(::getpid()))};
  if (status s = model::write_random_model(spec_of(family, o), dir.path.string()); !s)
    return s.err();
  auto cfg = model::load_config(dir.path.string());
  if (!cfg) return cfg.err();
  const model::model_config& c = cfg.value();

  config::manifest m = config::default_manifest(dir.path.string());
  m.kv_dtype = kv_dtype;
  m.kv_cache.enabled = true;
  m.kv_cache.pool_bytes = 1;  // the pool keeps one block: every other full block goes to the store
  m.kv_cache.host_bytes = uint64_t{1} << 30;
  m.prefill.kv_tokens = 2 * (o.prompt_tokens + 32);
  m.decode.kv_tokens = 2 * (o.prompt_tokens + 32);
  auto topo = deploy::topology::start(m);
  if (!topo) return topo.err();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < o.prompts; ++i)
    prompts.push_back(tokens_of(static_cast<uint64_t>(100 + i), o.prompt_tokens, 2048));
  const run_result r = run_requests(*topo.value(), prompts, 1);
  if (!r.failure.empty()) return error(errc::internal, family + ": a request failed: " + r.failure);
  wait_store_idle(*topo.value());

  nlohmann::json row{{"family", family},
                     {"kv_dtype", model::kv_dtype_name(kv_dtype)},
                     {"params", c.total_params()},
                     {"kv_bytes_per_token", c.kv_bytes_per_token(gpu::dtype_size(kv_dtype))}};
  for (const auto& s : nlohmann::json::parse(topo.value()->statuses_json())) {
    if (s["role"] != "kv_store") continue;
    const auto& d = s["detail"];
    const auto blocks = d["host"]["blocks"].get<uint64_t>();
    const auto bytes = d["host"]["bytes"].get<uint64_t>();
    row["store_blocks"] = blocks;
    row["store_bytes"] = bytes;
    row["store_bytes_per_token_reported"] = d["bytes_per_token"];
    row["store_bytes_per_token"] =
        blocks > 0 ? static_cast<double>(bytes) / static_cast<double>(blocks * m.block_tokens)
                   : 0.0;
  }
  if (!row.contains("store_blocks")) return error(errc::internal, family + ": no KV store ran");
  return row;
}

}  // namespace

result<nlohmann::json> measure_kv_footprint(const kv_footprint_options& o) {
  nlohmann::json rows = nlohmann::json::array();
  for (const char* family : {"qwen3_moe", "deepseek_v3"}) {
    for (gpu::dtype kv : {gpu::dtype::f32, gpu::dtype::bf16}) {
      auto row = measure_one(family, kv, o);
      if (!row) return row.err();
      rows.push_back(row.value());
    }
  }
  const double gqa = rows[0]["store_bytes_per_token"].get<double>();
  const double gqa_bf16 = rows[1]["store_bytes_per_token"].get<double>();
  const double mla = rows[2]["store_bytes_per_token"].get<double>();
  return nlohmann::json{{"prompt_tokens", o.prompt_tokens},
                        {"prompts", o.prompts},
                        {"rows", rows},
                        {"mla_over_gqa", gqa > 0 ? mla / gqa : 0.0},
                        {"bf16_over_f32", gqa > 0 ? gqa_bf16 / gqa : 0.0}};
}

void print_kv_footprint(const nlohmann::json& j) {
  table t({"model", "KV", "params (M)", "KV bytes/token (model)", "store blocks", "store bytes",
           "store bytes/token"});
  for (const auto& r : j["rows"]) {
    t.add_row({r["family"].get<std::string>(), r["kv_dtype"].get<std::string>(),
               fixed(r["params"].get<double>() / 1e6, 1),
               std::to_string(r["kv_bytes_per_token"].get<uint64_t>()),
               std::to_string(r["store_blocks"].get<uint64_t>()),
               std::to_string(r["store_bytes"].get<uint64_t>()),
               fixed(r["store_bytes_per_token"].get<double>(), 0)});
  }
  std::printf(
      "\nKV per cached token (%d prompts of %d tokens through a topology whose pool keeps one "
      "block, "
      "held by the KV store's host tier; the pool and the prefill-to-decode hand-off carry the "
      "same bytes per token):\n%s",
      j["prompts"].get<int>(), j["prompt_tokens"].get<int>(), t.render().c_str());
  std::printf("deepseek_v3 (MLA, latent + rope key stored once) / qwen3_moe (GQA), f32: %sx\n",
              fixed(j["mla_over_gqa"].get<double>(), 3).c_str());
  std::printf("bf16 KV / f32 KV (qwen3_moe, store bytes per token): %sx\n",
              fixed(j["bf16_over_f32"].get<double>(), 3).c_str());
}

namespace {

// One engine run: every prompt prefilled, then `decode_steps` timed decode steps of the batch.
result<nlohmann::json> decode_run(const model::loaded_model& m, gpu::backend& dev,
                                  gpu::dtype kv_dtype, const kv_decode_options& o) {
  model::engine_options eo;
  eo.kv_dtype = kv_dtype;
  eo.max_running = o.batch;
  eo.max_step_tokens = 512;
  eo.kv_tokens = o.batch * (o.prompt_tokens + o.decode_steps + 32);
  model::engine eng(m, dev, eo);
  model::request_options req;
  req.max_tokens = o.decode_steps + 1;
  std::vector<int64_t> ids;
  for (int i = 0; i < o.batch; ++i) {
    auto id = eng.submit(tokens_of(static_cast<uint64_t>(300 + i), o.prompt_tokens, 2048), req);
    if (!id) return id.err();
    ids.push_back(id.value());
  }
  // step() appends the tokens of each step to `events`: their count is the tokens produced.
  std::vector<model::token_event> events;
  // Prefill until every sequence has its first token: from then on each step decodes the batch.
  while (events.size() < ids.size() && eng.step(events)) {
  }
  const size_t first = events.size();
  const auto start = std::chrono::steady_clock::now();
  while (eng.step(events)) {
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t tokens = events.size() - first;
  return nlohmann::json{{"kv_dtype", model::kv_dtype_name(kv_dtype)},
                        {"kv_bytes", eng.kv_bytes()},
                        {"decode_tokens", tokens},
                        {"decode_s", s},
                        {"tokens_per_s", s > 0 ? static_cast<double>(tokens) / s : 0.0}};
}

}  // namespace

result<nlohmann::json> measure_kv_decode(const kv_decode_options& o) {
  kv_footprint_options shape;
  shape.layers = o.layers;
  shape.hidden = o.hidden;
  shape.moe_inter = o.moe_inter;
  shape.prompt_tokens = o.prompt_tokens;
  model_dir dir{std::filesystem::temp_directory_path() /
                ("brigade-bench-kv-decode-" + std::to_string(::getpid()))};
  model::model_spec spec = spec_of("qwen3_moe", shape);
  spec.max_positions = o.prompt_tokens + o.decode_steps + 64;
  if (status s = model::write_random_model(spec, dir.path.string()); !s) return s.err();
  auto dev = gpu::make_cpu_backend();
  auto m = model::loaded_model::load(dir.path.string(), *dev, true);
  if (!m) return m.err();
  nlohmann::json rows = nlohmann::json::array();
  for (gpu::dtype kv : {gpu::dtype::f32, gpu::dtype::bf16}) {
    auto row = decode_run(*m.value(), *dev, kv, o);
    if (!row) return row.err();
    rows.push_back(row.value());
  }
  const double f32 = rows[0]["tokens_per_s"].get<double>();
  return nlohmann::json{
      {"prompt_tokens", o.prompt_tokens},
      {"batch", o.batch},
      {"layers", o.layers},
      {"hidden", o.hidden},
      {"rows", rows},
      {"bf16_over_f32", f32 > 0 ? rows[1]["tokens_per_s"].get<double>() / f32 : 0.0}};
}

void print_kv_decode(const nlohmann::json& j) {
  table t({"KV", "KV bytes", "decode tokens", "decode s", "tokens/s"});
  for (const auto& r : j["rows"]) {
    t.add_row({r["kv_dtype"].get<std::string>(), std::to_string(r["kv_bytes"].get<uint64_t>()),
               std::to_string(r["decode_tokens"].get<uint64_t>()),
               fixed(r["decode_s"].get<double>(), 2), fixed(r["tokens_per_s"].get<double>(), 1)});
  }
  std::printf(
      "\nDecode at a long context (engine, qwen3_moe L%d h%d, %d sequences of %d prompt tokens, "
      "CPU):\n%s",
      j["layers"].get<int>(), j["hidden"].get<int>(), j["batch"].get<int>(),
      j["prompt_tokens"].get<int>(), t.render().c_str());
  std::printf("bf16 KV / f32 KV decode tokens/s: %sx\n",
              fixed(j["bf16_over_f32"].get<double>(), 3).c_str());
}

}  // namespace brigade::bench

#include "bench/cache_footprint.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/cache_requests.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "model/config.hpp"
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

result<nlohmann::json> measure_one(const std::string& family, const kv_footprint_options& o) {
  model_dir dir{std::filesystem::temp_directory_path() /
                ("brigade-bench-footprint-" + family + "-" + std::to_string(::getpid()))};
  if (status s = model::write_random_model(spec_of(family, o), dir.path.string()); !s)
    return s.err();
  auto cfg = model::load_config(dir.path.string());
  if (!cfg) return cfg.err();
  const model::model_config& c = cfg.value();

  config::manifest m = config::default_manifest(dir.path.string());
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
                     {"params", c.total_params()},
                     {"kv_bytes_per_token", c.kv_bytes_per_token()}};
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
    auto row = measure_one(family, o);
    if (!row) return row.err();
    rows.push_back(row.value());
  }
  const double gqa = rows[0]["store_bytes_per_token"].get<double>();
  const double mla = rows[1]["store_bytes_per_token"].get<double>();
  return nlohmann::json{{"prompt_tokens", o.prompt_tokens},
                        {"prompts", o.prompts},
                        {"rows", rows},
                        {"mla_over_gqa", gqa > 0 ? mla / gqa : 0.0}};
}

void print_kv_footprint(const nlohmann::json& j) {
  table t({"model", "params (M)", "KV bytes/token (model)", "store blocks", "store bytes",
           "store bytes/token"});
  for (const auto& r : j["rows"]) {
    t.add_row({r["family"].get<std::string>(), fixed(r["params"].get<double>() / 1e6, 1),
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
  std::printf("deepseek_v3 (MLA, latent + rope key stored once) / qwen3_moe (GQA): %sx\n",
              fixed(j["mla_over_gqa"].get<double>(), 3).c_str());
}

}  // namespace brigade::bench

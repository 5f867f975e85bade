// `brigade bench cache`: the prefix KV cache on an agent-like workload, where every prompt is a
// long shared prefix (96% of its tokens by default) plus a short part of its own.
//
//   - Prefill throughput (prompt tokens per second, one output token per request, 16 closed-loop
//     clients) through two actor topologies of the same model, the cache off and on, in
//     alternating halves of one run. At a hit rate h the work left is (1 - h) of the prompt, so
//     the bound on the speedup is 1 / (1 - h): 25x at 96%.
//   - Time to first token of one request whose prefix is served from each tier: the prefill
//     worker's pool, the KV store's host memory and its SSD (a third topology whose pool keeps
//     one block and whose host tier holds about one prefix: a filler prompt pushes the prefix
//     out to SSD before each SSD measurement), beside a miss.
//   - What a cached token costs: an MLA model beside a GQA one of about the same size
//     (cache_footprint.hpp).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/block_hash_timing.hpp"
#include "bench/cache_footprint.hpp"
#include "bench/cache_requests.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {
namespace {

// The cached side runs this many times as many requests as the uncached one: at a ~20x speedup
// it still finishes sooner, and its figure then spans hundreds of steps instead of a handful.
constexpr int cached_side_factor = 8;

struct cache_bench_options {
  bool json = false;
  int prefix_tokens = 1536;
  int unique_tokens = 64;
  int requests = 32;  // without the cache; with it, cached_side_factor times as many
  // Clients enough to keep requests queued at every step: the cached side's prompts compute
  // 64 tokens each, so 8 of them fill a 512-token step and 16 keep the next one full too.
  int concurrency = 16;
  int reps = 3;  // TTFT measurements per tier
  int layers = 4;
  int hidden = 1024;  // attention over the prefix weighs about as much beside the weights as in
                      // real MoE models
  int moe_inter = 1024;
  int top_k = 2;
  std::string ssd_dir;  // empty: a directory under /tmp
  bool footprint_only = false;
  bool kv_dtype_decode = false;
};

struct workload {
  cache_bench_options o;
  int vocab = 2048;
  uint64_t next_unique = 1000;

  // The shared prefix followed by a fresh part of its own.
  std::vector<int32_t> agent_prompt() {
    auto p = tokens_of(1, o.prefix_tokens, vocab);
    const auto own = tokens_of(next_unique++, o.unique_tokens, vocab);
    p.insert(p.end(), own.begin(), own.end());
    return p;
  }
  // A prompt of the same length that shares nothing.
  std::vector<int32_t> filler_prompt() {
    return tokens_of(next_unique++, o.prefix_tokens + o.unique_tokens, vocab);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Hit tokens per tier so far, from the router's account.
std::array<int64_t, 3> tier_hits(const deploy::topology& topo) {
  std::array<int64_t, 3> out{};
  for (const auto& s : nlohmann::json::parse(topo.statuses_json())) {
    if (s["role"] != "router") continue;
    for (const auto& [name, sc] : s["detail"]["cache"]["scenarios"].items()) {
      out[0] += sc.value("pool", int64_t{0});
      out[1] += sc.value("host", int64_t{0});
      out[2] += sc.value("ssd", int64_t{0});
    }
  }
  return out;
}

config::manifest base_manifest(const std::string& model_dir, const cache_bench_options& o) {
  config::manifest m = config::default_manifest(model_dir);
  m.experts.count = 2;
  m.prefill.kv_tokens = 4 * (o.prefix_tokens + o.unique_tokens + 16) * o.concurrency / 2;
  m.decode.kv_tokens = (o.prefix_tokens + o.unique_tokens + 32) * o.concurrency;
  m.decode.max_running = o.concurrency;
  m.kv_cache.host_bytes = 0;
  return m;
}

uint64_t block_bytes_of(const config::manifest& m, const model::model_spec& spec) {
  return 2ull * static_cast<uint64_t>(spec.layers) * static_cast<uint64_t>(m.block_tokens) *
         static_cast<uint64_t>(spec.kv_heads) * static_cast<uint64_t>(spec.head_dim) * 4;
}

struct throughput_figures {
  run_result off;
  run_result on;
};

// The cache off and on, in alternating halves, after one warm-up request each.
result<throughput_figures> measure_throughput(deploy::topology& off, deploy::topology& on,
                                              workload& w) {
  run_requests(off, {w.agent_prompt()}, 1);
  run_requests(on, {w.agent_prompt()}, 1);  // computes the shared prefix once
  throughput_figures f;
  for (int half : {w.o.requests / 2, w.o.requests - w.o.requests / 2}) {
    for (auto* side : {&f.off, &f.on}) {
      std::vector<std::vector<int32_t>> prompts;
      const int count = side == &f.on ? cached_side_factor * half : half;
      for (int i = 0; i < count; ++i)
        prompts.push_back(w.agent_prompt());
      const run_result r = run_requests(side == &f.off ? off : on, prompts, w.o.concurrency);
      if (!r.failure.empty()) return error(errc::internal, "a request failed: " + r.failure);
      side->wall_s += r.wall_s;
      side->worker.steps += r.worker.steps;
      side->worker.computed_tokens += r.worker.computed_tokens;
      side->worker.busy_s += r.worker.busy_s;
      side->prompt_tokens += r.prompt_tokens;
      side->cached_tokens += r.cached_tokens;
      side->ttft_ms.insert(side->ttft_ms.end(), r.ttft_ms.begin(), r.ttft_ms.end());
    }
  }
  return f;
}

struct tier_figures {
  std::vector<double> pool_ms, host_ms, ssd_ms, miss_ms;
  std::array<int64_t, 3> host_mix{}, ssd_mix{};  // hit tokens by tier in those measurements
};

void add_mix(std::array<int64_t, 3>& into, const std::array<int64_t, 3>& before,
             const std::array<int64_t, 3>& after) {
  for (size_t i = 0; i < 3; ++i)
    into[i] += after[i] - before[i];
}

// One request at a time: a hit from the pool (topology `on`), from host memory and from SSD
// (topology `tiers`), and a miss (topology `off`).
result<tier_figures> measure_tiers(deploy::topology& off, deploy::topology& on,
                                   deploy::topology& tiers, workload& w) {
  tier_figures f;
  run_requests(tiers, {w.agent_prompt()}, 1);
  wait_store_idle(tiers);
  auto one = [&](deploy::topology& t, std::vector<double>& into) -> status {
    const run_result r = run_requests(t, {w.agent_prompt()}, 1);
    if (!r.failure.empty()) return error(errc::internal, "a request failed: " + r.failure);
    into.push_back(r.ttft_ms.at(0));
    return ok_status();
  };
  for (int rep = 0; rep < w.o.reps; ++rep) {
    if (status s = one(on, f.pool_ms); !s) return s.err();
    if (status s = one(off, f.miss_ms); !s) return s.err();
    wait_store_idle(tiers);
    auto before = tier_hits(tiers);
    if (status s = one(tiers, f.host_ms); !s) return s.err();
    add_mix(f.host_mix, before, tier_hits(tiers));
    // A prompt as long as the prefix pushes the prefix out of host memory onto SSD.
    run_requests(tiers, {w.filler_prompt()}, 1);
    wait_store_idle(tiers);
    before = tier_hits(tiers);
    if (status s = one(tiers, f.ssd_ms); !s) return s.err();
    add_mix(f.ssd_mix, before, tier_hits(tiers));
  }
  return f;
}

struct bench_setup {
  std::filesystem::path model_dir;
  std::filesystem::path ssd_dir;
  bool own_ssd_dir = false;
  model::model_spec spec;
  std::unique_ptr<deploy::topology> off, on, tiers;
  ~bench_setup() {
    off.reset();
    on.reset();
    tiers.reset();
    std::error_code ec;
    std::filesystem::remove_all(model_dir, ec);
    if (own_ssd_dir) std::filesystem::remove_all(ssd_dir, ec);
  }
};

status start(const cache_bench_options& o, bench_setup& b) {
  const std::string tag = std::to_string(::getpid());
  b.model_dir = std::filesystem::temp_directory_path() / ("brigade-bench-cache-model-" + tag);
  b.own_ssd_dir = o.ssd_dir.empty();
  b.ssd_dir = b.own_ssd_dir
                  ? std::filesystem::temp_directory_path() / ("brigade-bench-cache-ssd-" + tag)
                  : std::filesystem::path(o.ssd_dir);
  std::error_code ec;
  std::filesystem::create_directories(b.ssd_dir, ec);
  b.spec.family = "qwen3_moe";
  b.spec.layers = o.layers;
  b.spec.hidden = o.hidden;
  b.spec.heads = o.hidden / 64;
  b.spec.kv_heads = std::max(1, o.hidden / 128);
  b.spec.head_dim = 64;
  b.spec.experts = 8;
  b.spec.top_k = o.top_k;
  b.spec.moe_inter = o.moe_inter;
  b.spec.vocab = 2048;
  b.spec.max_positions = 2 * (o.prefix_tokens + o.unique_tokens) + 64;
  b.spec.seed = 11;
  if (status s = model::write_random_model(b.spec, b.model_dir.string()); !s) return s;
  config::manifest m = base_manifest(b.model_dir.string(), o);
  m.kv_cache.enabled = false;
  auto off = deploy::topology::start(m);
  if (!off) return off.err();
  b.off = std::move(off.value());
  m.kv_cache.enabled = true;
  auto on = deploy::topology::start(m);
  if (!on) return on.err();
  b.on = std::move(on.value());
  const uint64_t block = block_bytes_of(m, b.spec);
  const uint64_t prefix_blocks = static_cast<uint64_t>(o.prefix_tokens + o.unique_tokens) / 16;
  m.kv_cache.pool_bytes = block;                        // the pool keeps one block
  m.kv_cache.host_bytes = (prefix_blocks + 2) * block;  // host memory about one prompt
  m.kv_cache.ssd_bytes = 8 * prefix_blocks * block;
  m.kv_cache.ssd_dir = b.ssd_dir.string();
  auto tiers = deploy::topology::start(m);
  if (!tiers) return tiers.err();
  b.tiers = std::move(tiers.value());
  return ok_status();
}

// Floating-point operations to prefill positions [from, to) of a prompt with the bench model:
// projections, router, active experts and attention over every earlier position (a token
// computed after a cached prefix still attends to all of it), per layer. The LM head runs once
// per prompt either way and is left out.
double prefill_flops(const model::model_spec& m, int from, int to) {
  const double q_dim = static_cast<double>(m.heads) * m.head_dim;
  const double kv_dim = static_cast<double>(m.kv_heads) * m.head_dim;
  const double h = m.hidden;
  const double per_token = 2 * h * (q_dim + 2 * kv_dim) + 2 * q_dim * h + 2 * h * m.experts +
                           m.top_k * 3.0 * 2 * h * m.moe_inter;
  double total = 0;
  for (int p = from; p < to; ++p)
    total += per_token + 4 * q_dim * (p + 1);
  return total * m.layers;
}

nlohmann::json to_json(const cache_bench_options& o, const throughput_figures& t,
                       const tier_figures& tf, const std::string& model_line,
                       const model::model_spec& spec) {
  const int prompt = o.prefix_tokens + o.unique_tokens;
  // A hit reuses the shared prefix's whole blocks; each prompt's own tokens are computed.
  const int reused = std::min(o.prefix_tokens, prompt - 1) / 16 * 16;
  const double flops_bound = prefill_flops(spec, 0, prompt) / prefill_flops(spec, reused, prompt);
  // Each side's steps: how full, how much of the wall time, and their operation rate.
  auto worker_json = [&](const run_result& r, int from) {
    const double flops = prefill_flops(spec, from, prompt) * static_cast<double>(r.ttft_ms.size());
    const auto& w = r.worker;
    return nlohmann::json{
        {"steps", w.steps},
        {"tokens_per_step", w.steps > 0 ? static_cast<double>(w.computed_tokens) / w.steps : 0.0},
        {"busy_fraction", w.busy_s / r.wall_s},
        {"gflops_per_busy_s", w.busy_s > 0 ? flops / w.busy_s / 1e9 : 0.0}};
  };
  const double off_tps = t.off.prompt_tokens / t.off.wall_s;
  const double on_tps = t.on.prompt_tokens / t.on.wall_s;
  const double hit_rate = static_cast<double>(t.on.cached_tokens) / t.on.prompt_tokens;
  const double shared = static_cast<double>(o.prefix_tokens) / (o.prefix_tokens + o.unique_tokens);
  return {{"model", model_line},
          {"prompt_tokens", o.prefix_tokens + o.unique_tokens},
          {"shared_prefix_fraction", shared},
          {"requests_without_cache", o.requests},
          {"requests_with_cache", cached_side_factor * o.requests},
          {"concurrency", o.concurrency},
          {"prefill_tokens_per_s_without_cache", off_tps},
          {"prefill_tokens_per_s_with_cache", on_tps},
          {"speedup", on_tps / off_tps},
          {"hit_rate", hit_rate},
          {"speedup_bound", 1.0 / (1.0 - hit_rate)},
          {"speedup_bound_flops", flops_bound},
          {"prefill_steps_without_cache", worker_json(t.off, 0)},
          {"prefill_steps_with_cache", worker_json(t.on, reused)},
          {"ttft_ms",
           {{"miss", median(tf.miss_ms)},
            {"pool", median(tf.pool_ms)},
            {"host", median(tf.host_ms)},
            {"ssd", median(tf.ssd_ms)}}},
          {"host_measurement_hit_tokens",
           {{"pool", tf.host_mix[0]}, {"host", tf.host_mix[1]}, {"ssd", tf.host_mix[2]}}},
          {"ssd_measurement_hit_tokens",
           {{"pool", tf.ssd_mix[0]}, {"host", tf.ssd_mix[1]}, {"ssd", tf.ssd_mix[2]}}}};
}

void print_table(const nlohmann::json& j) {
  std::printf("brigade bench cache: %s\n", j["model"].get<std::string>().c_str());
  std::printf(
      "agent workload: %d-token prompts, %.0f%% a shared prefix, 1 output token, %d "
      "requests without the cache and %d with it, from %d closed-loop clients\n\n",
      j["prompt_tokens"].get<int>(), 100 * j["shared_prefix_fraction"].get<double>(),
      j["requests_without_cache"].get<int>(), j["requests_with_cache"].get<int>(),
      j["concurrency"].get<int>());
  table t({"prefix cache", "prefill tok/s", "hit rate", "steps", "tokens/step", "busy",
           "GFLOP/s in steps"});
  auto steps = [](const nlohmann::json& w) -> std::vector<std::string> {
    return {std::to_string(w["steps"].get<int64_t>()), fixed(w["tokens_per_step"].get<double>(), 0),
            fixed(100 * w["busy_fraction"].get<double>(), 0) + "%",
            fixed(w["gflops_per_busy_s"].get<double>(), 1)};
  };
  std::vector<std::string> off_row{
      "off", fixed(j["prefill_tokens_per_s_without_cache"].get<double>(), 0), "0%"};
  std::vector<std::string> on_row{"on",
                                  fixed(j["prefill_tokens_per_s_with_cache"].get<double>(), 0),
                                  fixed(100 * j["hit_rate"].get<double>(), 1) + "%"};
  for (auto& cell : steps(j["prefill_steps_without_cache"]))
    off_row.push_back(cell);
  for (auto& cell : steps(j["prefill_steps_with_cache"]))
    on_row.push_back(cell);
  t.add_row(off_row);
  t.add_row(on_row);
  std::printf("%s", t.render().c_str());
  std::printf(
      "speedup %sx (goal 20x at 96%%); bounds: %sx counting tokens, %sx counting operations "
      "(the tokens computed after the cached prefix still attend to all of it)\n\n",
      fixed(j["speedup"].get<double>(), 1).c_str(),
      fixed(j["speedup_bound"].get<double>(), 1).c_str(),
      fixed(j["speedup_bound_flops"].get<double>(), 1).c_str());
  const auto mix = [](const nlohmann::json& m) {
    return std::to_string(m["pool"].get<int64_t>()) + "/" +
           std::to_string(m["host"].get<int64_t>()) + "/" + std::to_string(m["ssd"].get<int64_t>());
  };
  table ttft({"served from", "TTFT ms (median)", "hit tokens pool/host/ssd"});
  const auto& ms = j["ttft_ms"];
  ttft.add_row({"miss (cache off)", fixed(ms["miss"].get<double>(), 1), "-"});
  ttft.add_row({"pool", fixed(ms["pool"].get<double>(), 1), "all pool"});
  ttft.add_row(
      {"host memory", fixed(ms["host"].get<double>(), 1), mix(j["host_measurement_hit_tokens"])});
  ttft.add_row({"SSD", fixed(ms["ssd"].get<double>(), 1), mix(j["ssd_measurement_hit_tokens"])});
  std::printf("%s", ttft.render().c_str());
  // What naming blocks costs beside what computing them does (a prefilled token, cache off).
  const auto& h = j["block_hash"];
  const double token_ns = 1e9 / j["prefill_tokens_per_s_without_cache"].get<double>();
  const double per_token = h["ns_per_block"].get<double>() / h["block_tokens"].get<int>();
  table hashes({"block hash", "ns per 16-token block", "ns per token", "of a prefilled token"});
  hashes.add_row({h["scheme"].get<std::string>() + " (keyed)",
                  fixed(h["ns_per_block"].get<double>(), 1), fixed(per_token, 2),
                  fixed(100 * per_token / token_ns, 4) + "%"});
  const double legacy_per_token = h["legacy_ns_per_block"].get<double>() / 16;
  hashes.add_row({h["legacy_scheme"].get<std::string>() + ", before",
                  fixed(h["legacy_ns_per_block"].get<double>(), 1), fixed(legacy_per_token, 2),
                  fixed(100 * legacy_per_token / token_ns, 4) + "%"});
  std::printf("\n%s", hashes.render().c_str());
  std::printf("keyed / unkeyed: %sx per block\n", fixed(h["ratio"].get<double>(), 2).c_str());
}

}  // namespace

int cache(int argc, char** argv) {
  cache_bench_options o;
  CLI::App app{"prefix KV cache: prefill throughput with and without it, TTFT per tier",
               "brigade bench cache"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", o.json, "print one JSON object with every figure");
  app.add_option("--prefix-tokens", o.prefix_tokens, "shared prefix length")->capture_default_str();
  app.add_option("--unique-tokens", o.unique_tokens, "tokens of each prompt's own")
      ->capture_default_str();
  app.add_option("--requests", o.requests, "requests without the cache (with it: 8 times as many)")
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "closed-loop clients (requests in flight)")
      ->capture_default_str();
  app.add_option("--reps", o.reps, "TTFT measurements per tier")->capture_default_str();
  app.add_option("--layers", o.layers, "model layers")->capture_default_str();
  app.add_option("--hidden", o.hidden, "model hidden size (a multiple of 128)")
      ->capture_default_str();
  app.add_option("--moe-inter", o.moe_inter, "intermediate size of an expert")
      ->capture_default_str();
  app.add_option("--top-k", o.top_k, "experts per token (of 8)")->capture_default_str();
  app.add_option("--ssd-dir", o.ssd_dir, "directory for the SSD tier (default: under /tmp)");
  app.add_flag("--footprint-only", o.footprint_only,
               "only the KV bytes per token of an MLA model beside a GQA one, f32 and bf16 KV");
  app.add_flag("--kv-dtype-decode", o.kv_dtype_decode,
               "with --footprint-only: also the engine's decode tokens/s at a 2048-token context, "
               "batch 8, with an f32 and a bf16 KV cache");
  CLI11_PARSE(app, argc, argv);
  if (o.prefix_tokens < 16 || o.unique_tokens < 1 || o.requests < 2 || o.concurrency < 1 ||
      o.reps < 1 || o.layers < 1 || o.hidden < 128 || o.hidden % 128 != 0 || o.moe_inter < 1 ||
      o.top_k < 1 || o.top_k > 8) {
    std::fprintf(stderr,
                 "bench cache: prefix >= 16, requests >= 2, hidden a multiple of 128, "
                 "other counts positive\n");
    return 2;
  }
  kv_footprint_options fo;
  fo.layers = o.layers;
  fo.hidden = o.hidden;
  fo.moe_inter = o.moe_inter;
  auto footprint = measure_kv_footprint(fo);
  if (!footprint) {
    std::fprintf(stderr, "bench cache: %s\n", footprint.err().message.c_str());
    return 1;
  }
  if (o.footprint_only) {
    nlohmann::json out{{"kv_footprint", footprint.value()}};
    if (o.kv_dtype_decode) {
      kv_decode_options d;
      d.layers = o.layers;
      d.hidden = o.hidden;
      d.moe_inter = o.moe_inter;
      auto decode = measure_kv_decode(d);
      if (!decode) {
        std::fprintf(stderr, "bench cache: %s\n", decode.err().message.c_str());
        return 1;
      }
      out["kv_decode"] = decode.value();
    }
    if (o.json) {
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    print_kv_footprint(out["kv_footprint"]);
    if (out.contains("kv_decode")) print_kv_decode(out["kv_decode"]);
    return 0;
  }
  bench_setup b;
  if (status s = start(o, b); !s) {
    std::fprintf(stderr, "bench cache: %s\n", s.err().message.c_str());
    return 1;
  }
  workload w{o, b.spec.vocab};
  auto t = measure_throughput(*b.off, *b.on, w);
  if (!t) {
    std::fprintf(stderr, "bench cache: %s\n", t.err().message.c_str());
    return 1;
  }
  auto tiers = measure_tiers(*b.off, *b.on, *b.tiers, w);
  if (!tiers) {
    std::fprintf(stderr, "bench cache: %s\n", tiers.err().message.c_str());
    return 1;
  }
  const std::string model_line = "qwen3_moe, " + std::to_string(o.layers) + " layers, hidden " +
                                 std::to_string(o.hidden) + ", 8 experts of " +
                                 std::to_string(o.moe_inter) + " top-" + std::to_string(o.top_k) +
                                 ", CPU backend";
  nlohmann::json j = to_json(o, t.value(), tiers.value(), model_line, b.spec);
  j["block_hash"] = to_json(time_block_hashes(16));
  j["kv_footprint"] = footprint.value();
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    print_table(j);
    print_kv_footprint(j["kv_footprint"]);
  }
  return 0;
}

}  // namespace brigade::bench

// `brigade replay`: replays a Mooncake-format trace through the prefix cache and placement code
// (kvcache/trace_replay.hpp) and reports hit rates and load balance.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/block_hash_timing.hpp"
#include "bench/table.hpp"
#include "cli/commands.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/trace_replay.hpp"

namespace brigade::cli {

namespace {

nlohmann::json to_json(const kvcache::replay_report& report) {
  nlohmann::json out;
  out["policy"] = kvcache::to_string(report.policy);
  out["requests"] = report.requests;
  out["prompt_tokens"] = report.prompt_tokens;
  out["hit_tokens"] = report.hit_tokens;
  out["hit_rate"] = report.hit_rate;
  out["ideal_hit_rate"] = report.ideal_hit_rate;
  out["hit_rate_over_ideal"] =
      report.ideal_hit_rate > 0 ? report.hit_rate / report.ideal_hit_rate : 0.0;
  out["max_over_mean_load"] = report.max_over_mean_load;
  out["expired_blocks"] = report.expired_blocks;
  out["per_replica"] = nlohmann::json::array();
  for (const auto& r : report.replicas) {
    out["per_replica"].push_back({
        {"requests", r.requests},
        {"prompt_tokens", r.prompt_tokens},
        {"hit_tokens", r.hit_tokens},
        {"hit_rate", r.prompt_tokens > 0 ? double(r.hit_tokens) / double(r.prompt_tokens) : 0.0},
        {"computed_tokens", r.computed_tokens},
        {"evicted_blocks", r.evicted_blocks},
        {"mean_queue_wait_s", r.mean_queue_wait_s},
        {"max_queue_wait_s", r.max_queue_wait_s},
    });
  }
  return out;
}

void print_table(const kvcache::replay_report& report) {
  std::printf("policy %s: hit rate %.2f%% (ideal %.2f%%, %.1f%% of ideal), max/mean load %.3f\n\n",
              kvcache::to_string(report.policy), 100 * report.hit_rate, 100 * report.ideal_hit_rate,
              report.ideal_hit_rate > 0 ? 100 * report.hit_rate / report.ideal_hit_rate : 0.0,
              report.max_over_mean_load);
  std::printf("%7s %9s %14s %9s %16s %9s %12s %11s\n", "replica", "requests", "prompt_tokens",
              "hit_rate", "computed_tokens", "evicted", "mean_wait_s", "max_wait_s");
  for (std::size_t i = 0; i < report.replicas.size(); ++i) {
    const auto& r = report.replicas[i];
    const double hit = r.prompt_tokens > 0 ? double(r.hit_tokens) / double(r.prompt_tokens) : 0;
    std::printf("%7zu %9lld %14lld %8.2f%% %16lld %9lld %12.2f %11.2f\n", i,
                static_cast<long long>(r.requests), static_cast<long long>(r.prompt_tokens),
                100 * hit, static_cast<long long>(r.computed_tokens),
                static_cast<long long>(r.evicted_blocks), r.mean_queue_wait_s, r.max_queue_wait_s);
  }
}

struct replay_args {
  std::string trace_path;
  std::string policy_name = "cache_aware";
  kvcache::replay_options options;
  bool as_json = false;
  bool compare_hashes = false;
};

void add_options(CLI::App& app, replay_args& args) {
  auto& o = args.options;
  app.add_option("--trace", args.trace_path, "trace file, one JSON request per line")->required();
  app.add_option("--replicas", o.replicas, "prefill replicas")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--cache-tokens-per-replica", o.cache_tokens_per_replica,
                 "prefix cache capacity of each replica, in tokens")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 50))
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per cached block")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--policy", args.policy_name, "round_robin, cache_aware or pooled")
      ->capture_default_str();
  app.add_option("--prefill-tokens-per-s", o.prefill_tokens_per_s,
                 "prefill speed of one replica, for the queueing model")
      ->check(CLI::Range(1.0, 1e12))
      ->capture_default_str();
  app.add_option("--balance-slack", o.balance_slack,
                 "how far above the mean load cache_aware may load a replica")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  app.add_flag("--json", args.as_json, "print one JSON object instead of a table");
  app.add_flag("--compare-hash-schemes", args.compare_hashes,
               "also replay with the unkeyed 64-bit block hash brigade used before, and print "
               "both schemes' hash cost, hit rate and replay speed side by side");
}

/// On a terminal the progress line rewrites itself; in a log it appears every quarter.
kvcache::replay_progress progress_printer(const std::string& policy) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto next_quarter = std::make_shared<std::size_t>(1);
  return [=](std::size_t done, std::size_t total) {
    if (tty) {
      std::fprintf(stderr, "\rreplay %s: %zu/%zu requests%s", policy.c_str(), done, total,
                   done == total ? "\n" : "");
    } else if (done * 4 >= *next_quarter * total) {
      std::fprintf(stderr, "replay %s: %zu/%zu requests\n", policy.c_str(), done, total);
      while (*next_quarter * total <= done * 4)
        ++*next_quarter;
    }
  };
}

// Replays the trace under each block-hash scheme, alternating, and reports what each costs.
result<nlohmann::json> compare_hash_schemes(const std::vector<kvcache::trace_request>& trace,
                                            const kvcache::replay_options& options) {
  const bench::block_hash_timing timing =
      bench::time_block_hashes(static_cast<int>(options.block_size));
  nlohmann::json out = nlohmann::json::array();
  for (auto hashing : {kvcache::replay_hashing::keyed, kvcache::replay_hashing::legacy_xxh3_64}) {
    const bool keyed = hashing == kvcache::replay_hashing::keyed;
    const auto requests = kvcache::prepare_replay(trace, options.block_size, hashing);
    const auto start = std::chrono::steady_clock::now();
    auto report = kvcache::replay(requests, options, {});
    if (!report) return report.err();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.push_back({{"scheme", keyed ? std::string(kvcache::block_hasher::scheme) + " (keyed)"
                                    : std::string("xxh3-64 (unkeyed, before)")},
                   {"ns_per_block", keyed ? timing.keyed_ns_per_block : timing.legacy_ns_per_block},
                   {"hit_rate", report->hit_rate},
                   {"replay_s", s},
                   {"requests_per_s", s > 0 ? static_cast<double>(report->requests) / s : 0.0}});
  }
  return out;
}

void print_schemes(const nlohmann::json& schemes) {
  std::printf("\nblock hash schemes, side by side (%s replayed under each):\n", "the same trace");
  bench::table t({"block hash", "ns per block", "hit rate", "replay s", "requests/s"});
  for (const auto& s : schemes) {
    t.add_row({s["scheme"].get<std::string>(), bench::fixed(s["ns_per_block"].get<double>(), 1),
               bench::fixed(100 * s["hit_rate"].get<double>(), 2) + "%",
               bench::fixed(s["replay_s"].get<double>(), 2),
               bench::fixed(s["requests_per_s"].get<double>(), 0)});
  }
  std::printf("%s", t.render().c_str());
}

}  // namespace

int replay(int argc, char** argv) {
  CLI::App app{
      "Replay a Mooncake-format request trace through brigade's prefix cache, eviction "
      "and placement code, without model compute."};
  app.option_defaults()->always_capture_default();
  replay_args args;
  add_options(app, args);
  CLI11_PARSE(app, argc, argv);

  auto policy = kvcache::parse_choice_policy(args.policy_name);
  if (!policy) return std::fprintf(stderr, "brigade replay: %s\n", policy.err().message.c_str()), 2;
  args.options.policy = *policy;
  auto trace = kvcache::load_mooncake_trace(args.trace_path);
  if (!trace)
    return std::fprintf(stderr, "brigade replay: %s\n", trace.err().describe().c_str()), 1;
  const auto requests = kvcache::prepare_replay(*trace, args.options.block_size);
  const auto start = std::chrono::steady_clock::now();
  auto report = kvcache::replay(requests, args.options, progress_printer(args.policy_name));
  // The replay and its unbounded-cache reference, without loading and hashing the trace.
  const double replay_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!report)
    return std::fprintf(stderr, "brigade replay: %s\n", report.err().describe().c_str()), 1;
  const auto& o = args.options;
  nlohmann::json schemes = nlohmann::json::array();
  if (args.compare_hashes) {
    auto compared = compare_hash_schemes(*trace, args.options);
    if (!compared)
      return std::fprintf(stderr, "brigade replay: %s\n", compared.err().describe().c_str()), 1;
    schemes = std::move(*compared);
  }
  if (args.as_json) {
    nlohmann::json out = to_json(*report);
    out["trace"] = args.trace_path;
    out["replicas"] = o.replicas;
    out["cache_tokens_per_replica"] = o.cache_tokens_per_replica;
    out["block_size"] = o.block_size;
    out["prefill_tokens_per_s"] = o.prefill_tokens_per_s;
    out["replay_s"] = replay_s;
    if (args.compare_hashes) out["hash_schemes"] = schemes;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "replay of %s: %lld requests, %zu replicas x %lld cached tokens, block %zu, %.2f s\n",
        args.trace_path.c_str(), static_cast<long long>(report->requests), o.replicas,
        static_cast<long long>(o.cache_tokens_per_replica), o.block_size, replay_s);
    print_table(*report);
    if (args.compare_hashes) print_schemes(schemes);
  }
  return 0;
}

}  // namespace brigade::cli

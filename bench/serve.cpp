// `brigade bench serve`: the HTTP server under closed-loop load at several concurrencies, on a
// generated model: requests/s, output tokens/s, time to first token and time per output token
// (p50, p99) measured at the client. Beside each HTTP run, the same requests go straight into the
// service (no HTTP), so the table shows what the HTTP layer costs, measured side by side.
//
// Hook for the actor topology: `services` below lists what is measured behind the HTTP server.
// Today it holds the single-process engine_service only; when the actor router implements
// inference_service, add it there and the benchmark reports actor_overhead_ratio (engine output
// tokens/s over actors' at each concurrency). Until then the JSON carries null and a note.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/load_generator.hpp"
#include "bench/table.hpp"
#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"
#include "model/tokenizer.hpp"
#include "serve/api_handler.hpp"
#include "serve/engine_service.hpp"
#include "serve/http_server.hpp"

namespace brigade::bench {
namespace {

struct serve_bench_options {
  bool json = false;
  std::vector<int> levels = {1, 8, 32, 64};
  int min_requests = 32;  // Per level: max(min_requests, 4 x concurrency).
  int prompt_tokens = 32;
  int max_tokens = 32;
  bool direct = true;
};

std::vector<int32_t> prompt_ids(int request, int tokens, int vocab) {
  // Distinct prompts per request, so that a prefix cache cannot turn the benchmark into hits.
  std::vector<int32_t> ids;
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(request + 1);
  for (int i = 0; i < tokens; ++i) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    ids.push_back(static_cast<int32_t>(3 + x % static_cast<uint64_t>(vocab - 3)));
  }
  return ids;
}

struct level_result {
  int concurrency = 0;
  int requests = 0;
  load_result http;
  load_result direct;
};

nlohmann::json figures(const load_result& r) {
  std::vector<double> ttft, tpot;
  for (const auto& s : r.samples) {
    ttft.push_back(s.ttft_s * 1e3);
    tpot.push_back(s.tpot_s * 1e3);
  }
  return {{"requests_per_s", r.requests_per_s()},
          {"output_tokens_per_s", r.output_tokens_per_s()},
          {"ttft_ms_p50", percentile(ttft, 50)},
          {"ttft_ms_p99", percentile(ttft, 99)},
          {"tpot_ms_p50", percentile(tpot, 50)},
          {"tpot_ms_p99", percentile(tpot, 99)},
          {"completed", r.samples.size()},
          {"errors", r.errors},
          {"wall_s", r.wall_s}};
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

void append(load_result& into, const load_result& part) {
  into.wall_s += part.wall_s;
  into.samples.insert(into.samples.end(), part.samples.begin(), part.samples.end());
  if (into.errors == 0) into.first_error = part.first_error;
  into.errors += part.errors;
}

void print_table(const serve_bench_options& o, const std::vector<level_result>& levels,
                 const std::string& model_line) {
  std::printf("brigade bench serve: %s\n", model_line.c_str());
  std::printf("prompt %d tokens, %d output tokens, greedy, streamed completions over HTTP\n\n",
              o.prompt_tokens, o.max_tokens);
  table t({"concurrency", "requests", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
           "TPOT p50 ms", "TPOT p99 ms", "direct tok/s", "HTTP/direct"});
  for (const auto& l : levels) {
    const nlohmann::json h = figures(l.http);
    const double direct_tps = l.direct.output_tokens_per_s();
    t.add_row({std::to_string(l.concurrency), std::to_string(l.requests),
               fixed(h["requests_per_s"].get<double>(), 2),
               fixed(h["output_tokens_per_s"].get<double>(), 1),
               fixed(h["ttft_ms_p50"].get<double>(), 1), fixed(h["ttft_ms_p99"].get<double>(), 1),
               fixed(h["tpot_ms_p50"].get<double>(), 2), fixed(h["tpot_ms_p99"].get<double>(), 2),
               o.direct ? fixed(direct_tps, 1) : "-",
               o.direct ? fixed(ratio(l.http.output_tokens_per_s(), direct_tps), 3) : "-"});
  }
  std::printf("%s", t.render().c_str());
  for (const auto& l : levels) {
    if (l.http.errors + l.direct.errors == 0) continue;
    std::printf("concurrency %d: %d HTTP and %d direct requests failed; first: %s\n", l.concurrency,
                l.http.errors, l.direct.errors,
                (l.http.first_error + l.direct.first_error).c_str());
  }
  std::printf(
      "\nHTTP/direct: output tokens/s through HTTP over the same requests submitted straight\n"
      "to the engine service in the same run.\n"
      "actor overhead ratio: needs the actor topology behind inference_service (not built "
      "yet).\n");
}

nlohmann::json to_json(const serve_bench_options& o, const std::vector<level_result>& levels,
                       const std::string& model_line) {
  nlohmann::json out = {{"benchmark", "serve"},
                        {"model", model_line},
                        {"prompt_tokens", o.prompt_tokens},
                        {"max_tokens", o.max_tokens},
                        {"levels", nlohmann::json::array()}};
  for (const auto& l : levels) {
    nlohmann::json j = {
        {"concurrency", l.concurrency}, {"requests", l.requests}, {"http", figures(l.http)}};
    if (o.direct) {
      j["direct"] = figures(l.direct);
      j["http_over_direct_tokens_per_s"] =
          ratio(l.http.output_tokens_per_s(), l.direct.output_tokens_per_s());
    }
    out["levels"].push_back(j);
  }
  out["actor_overhead_ratio"] = nullptr;
  out["actor_overhead_note"] = "needs the actor topology behind inference_service (not built yet)";
  return out;
}

}  // namespace

int serve(int argc, char** argv) {
  serve_bench_options o;
  bool no_direct = false;
  CLI::App app{"HTTP serving throughput and latency at several concurrencies",
               "brigade bench serve"};
  app.add_flag("--json", o.json, "print one JSON object with every figure");
  app.add_option("--levels", o.levels, "concurrency levels")->delimiter(',')->capture_default_str();
  app.add_option("--min-requests", o.min_requests, "requests per level at least (4 x concurrency)")
      ->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens, "prompt length")->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens, "output tokens per request")->capture_default_str();
  app.add_flag("--no-direct", no_direct, "skip the runs straight into the service");
  CLI11_PARSE(app, argc, argv);
  o.direct = !no_direct;

  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("brigade-bench-serve-" + std::to_string(::getpid()));
  model::model_spec spec;
  spec.seed = 7;
  if (status w = model::write_random_model(spec, dir.string()); !w) {
    std::fprintf(stderr, "bench serve: %s\n", w.err().message.c_str());
    return 1;
  }
  auto tok = model::tokenizer::load(dir.string());
  auto dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(dir.string(), *dev, true);
  if (!tok || !loaded) {
    std::fprintf(stderr, "bench serve: cannot load the generated model\n");
    return 1;
  }
  const int max_level = *std::max_element(o.levels.begin(), o.levels.end());
  serve::engine_service_options so;
  so.model_name = "bench";
  so.max_queued = 4 * max_level + 16;
  so.engine.max_running = std::max(max_level, 1);
  so.engine.kv_tokens = std::max(max_level, 1) * (o.prompt_tokens + o.max_tokens + 16);
  serve::engine_service service(*loaded.value(), *dev, so);
  service.start();
  serve::api_handler handler(service, tok.value(), {});
  serve::http_server_options ho;
  ho.port = 0;
  serve::http_server server(handler, ho);
  if (status s = server.start(); !s) {
    std::fprintf(stderr, "bench serve: %s\n", s.err().message.c_str());
    return 1;
  }
  const int vocab = loaded.value()->config.vocab_size;
  int next_id = 1 << 30;  // Direct requests' ids, apart from the HTTP layer's.
  auto body = [&](int i) {
    nlohmann::json b = {{"model", "bench"},
                        {"prompt", prompt_ids(i, o.prompt_tokens, vocab)},
                        {"max_tokens", o.max_tokens},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}};
    return b.dump();
  };
  std::atomic<int> direct_ids{next_id};
  auto direct_request = [&](int i) {
    serve::generation_request r;
    r.id = direct_ids++;
    r.prompt = prompt_ids(i, o.prompt_tokens, vocab);
    r.max_tokens = o.max_tokens;
    return r;
  };

  run_http_load({"127.0.0.1", server.port(), 1, 2, body});  // Warm-up.
  std::vector<level_result> levels;
  for (int c : o.levels) {
    level_result l;
    l.concurrency = c;
    l.requests = std::max(o.min_requests, 4 * c);
    // HTTP and direct runs alternate in two halves, so that a change in the machine's load
    // during the level weighs on both sides of the ratio alike.
    for (int half : {l.requests / 2, l.requests - l.requests / 2}) {
      append(l.http, run_http_load({"127.0.0.1", server.port(), c, half, body}));
      if (o.direct) append(l.direct, run_direct_load(service, c, half, direct_request));
    }
    levels.push_back(std::move(l));
  }
  server.stop();
  service.stop();
  fs::remove_all(dir);

  std::ostringstream model_line;
  const auto& cfg = loaded.value()->config;
  model_line << cfg.model_type << ", " << cfg.num_layers << " layers, hidden " << cfg.hidden_size
             << ", " << cfg.num_experts << " experts top-" << cfg.top_k << ", CPU backend";
  if (o.json) {
    std::printf("%s\n", to_json(o, levels, model_line.str()).dump().c_str());
  } else {
    print_table(o, levels, model_line.str());
  }
  int errors = 0;
  for (const auto& l : levels)
    errors += l.http.errors + l.direct.errors;
  return errors == 0 ? 0 : 1;
}

}  // namespace brigade::bench

// `brigade bench serve`: the HTTP server under closed-loop load at several concurrencies, on a
// generated model: requests/s, output tokens/s, time to first token and time per output token
// (p50, p99) measured at the client. Three runs per level, alternating in two halves so that the
// machine's changing load weighs on all alike:
//   - HTTP -> engine_service (the single-process engine): the headline figures;
//   - the same requests straight into engine_service, no HTTP: what the HTTP layer costs;
//   - HTTP -> the actor topology (router, prefill and decode workers, expert shards) from the
//     embedded default manifest: actor_overhead_ratio = engine output tokens/s over the actors'.
// Then n choices against n separate requests on the topology (--choices): one request with n = N
// shares its prompt's KV through the prefix cache, N requests sent together each compute it.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bench/actor_overhead.hpp"
#include "bench/load_generator.hpp"
#include "bench/sample_statistics.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
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
  bool actors = true;
  int overhead_batch = 32;
  int overhead_steps = 64;
  int choices = 4;          // n of the choices comparison; below 2 skips it.
  int choices_prompts = 8;  // Prompts in each mode of it.
  int choices_prompt_tokens = 512;
};

// One mode of the choices comparison: its load and the prompt tokens the prefill workers
// computed meanwhile.
struct choices_mode {
  load_result load;
  int64_t prefill_tokens = 0;
};

struct choices_result {
  choices_mode shared;    // One request with n choices per prompt.
  choices_mode separate;  // n requests per prompt, sent together.
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
  load_result http;    // HTTP -> engine_service.
  load_result direct;  // engine_service without HTTP.
  load_result actors;  // HTTP -> actor topology.
};

nlohmann::json figures(const load_result& r) {
  std::vector<double> ttft, tpot;
  for (const auto& s : r.samples) {
    ttft.push_back(s.ttft_s * 1e3);
    tpot.push_back(s.tpot_s * 1e3);
  }
  return {{"requests_per_s", r.requests_per_s()},
          {"output_tokens_per_s", r.output_tokens_per_s()},
          {"ttft_ms_p50", quantile(ttft, 0.5)},
          {"ttft_ms_p99", quantile(ttft, 0.99)},
          {"tpot_ms_p50", quantile(tpot, 0.5)},
          {"tpot_ms_p99", quantile(tpot, 0.99)},
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

std::string dash_or(bool on, const std::string& text) {
  return on ? text : "-";
}

void print_table(const serve_bench_options& o, const std::vector<level_result>& levels,
                 const std::string& model_line) {
  std::printf("brigade bench serve: %s\n", model_line.c_str());
  std::printf("prompt %d tokens, %d output tokens, greedy, streamed completions over HTTP\n\n",
              o.prompt_tokens, o.max_tokens);
  table t({"conc", "reqs", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
           "direct tok/s", "HTTP/direct", "actors tok/s", "actors TTFT p50", "actors TPOT p50",
           "engine/actors"});
  for (const auto& l : levels) {
    const nlohmann::json h = figures(l.http);
    const nlohmann::json a = figures(l.actors);
    const double tps = l.http.output_tokens_per_s();
    t.add_row({std::to_string(l.concurrency), std::to_string(l.requests),
               fixed(h["requests_per_s"].get<double>(), 2), fixed(tps, 1),
               fixed(h["ttft_ms_p50"].get<double>(), 1), fixed(h["ttft_ms_p99"].get<double>(), 1),
               fixed(h["tpot_ms_p50"].get<double>(), 2), fixed(h["tpot_ms_p99"].get<double>(), 2),
               dash_or(o.direct, fixed(l.direct.output_tokens_per_s(), 1)),
               dash_or(o.direct, fixed(ratio(tps, l.direct.output_tokens_per_s()), 3)),
               dash_or(o.actors, fixed(l.actors.output_tokens_per_s(), 1)),
               dash_or(o.actors, fixed(a["ttft_ms_p50"].get<double>(), 1)),
               dash_or(o.actors, fixed(a["tpot_ms_p50"].get<double>(), 2)),
               dash_or(o.actors, fixed(ratio(tps, l.actors.output_tokens_per_s()), 3))});
  }
  std::printf("%s", t.render().c_str());
  for (const auto& l : levels) {
    const int errors = l.http.errors + l.direct.errors + l.actors.errors;
    if (errors == 0) continue;
    std::printf("concurrency %d: %d requests failed; first: %s\n", l.concurrency, errors,
                (l.http.first_error + l.direct.first_error + l.actors.first_error).c_str());
  }
  std::printf(
      "\nTimes in ms. HTTP/direct: output tokens/s through HTTP over the same requests submitted\n"
      "straight to the engine service. engine/actors: output tokens/s of HTTP -> engine over\n"
      "HTTP -> actor topology (one prefill and one decode worker, four expert shards). All three\n"
      "runs of a level alternate in two halves within the same run.\n");
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
    if (o.actors) {
      j["actors"] = figures(l.actors);
      j["actor_overhead_ratio"] =
          ratio(l.http.output_tokens_per_s(), l.actors.output_tokens_per_s());
    }
    out["levels"].push_back(j);
  }
  return out;
}

// The generated model, the services and their HTTP servers for one run; the destructor stops
// them and removes the model's files, whichever way the run ends.
struct harness {
  std::filesystem::path dir;
  std::unique_ptr<model::tokenizer> tok;
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<model::loaded_model> loaded;
  std::unique_ptr<serve::engine_service> service;
  std::unique_ptr<serve::api_handler> handler;
  std::unique_ptr<serve::http_server> server;
  std::unique_ptr<deploy::topology> topo;
  std::unique_ptr<serve::api_handler> topo_handler;
  std::unique_ptr<serve::http_server> topo_server;

  ~harness() {
    if (server) server->stop();
    if (service) service->stop();
    if (topo_server) topo_server->stop();
    topo_server.reset();
    topo_handler.reset();
    topo.reset();
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

int max_level_of(const serve_bench_options& o) {
  return std::max(1, *std::max_element(o.levels.begin(), o.levels.end()));
}

status start_engine(const serve_bench_options& o, harness& h) {
  auto tok = model::tokenizer::load(h.dir.string());
  if (!tok) return tok.err();
  h.tok = std::make_unique<model::tokenizer>(std::move(tok.value()));
  h.dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(h.dir.string(), *h.dev, true);
  if (!loaded) return loaded.err();
  h.loaded = std::move(loaded.value());
  const int max_level = max_level_of(o);
  serve::engine_service_options so;
  so.model_name = "bench";
  so.max_queued = 4 * max_level + 16;
  so.engine.max_running = max_level;
  so.engine.kv_tokens = max_level * (o.prompt_tokens + o.max_tokens + 16);
  h.service = std::make_unique<serve::engine_service>(*h.loaded, *h.dev, so);
  h.service->start();
  h.handler =
      std::make_unique<serve::api_handler>(*h.service, *h.tok, serve::api_handler_options{});
  serve::http_server_options ho;
  ho.port = 0;
  h.server = std::make_unique<serve::http_server>(*h.handler, ho);
  return h.server->start();
}

// The embedded default topology, sized like the engine: as many running sequences, as much KV.
status start_actors(const serve_bench_options& o, harness& h) {
  const int max_level = max_level_of(o);
  config::manifest m = config::default_manifest(h.dir.string());
  m.admission_queue = 4 * max_level + 16;
  m.decode.max_running = max_level;
  m.decode.kv_tokens =
      std::max(m.decode.kv_tokens, max_level * (o.prompt_tokens + o.max_tokens + 16));
  auto topo = deploy::topology::start(m);
  if (!topo) return topo.err();
  h.topo = std::move(topo.value());
  h.topo_handler =
      std::make_unique<serve::api_handler>(h.topo->service(), *h.tok, serve::api_handler_options{});
  serve::http_server_options ho;
  ho.port = 0;
  h.topo_server = std::make_unique<serve::http_server>(*h.topo_handler, ho);
  return h.topo_server->start();
}

status start_harness(const serve_bench_options& o, harness& h) {
  h.dir = std::filesystem::temp_directory_path() /
          ("brigade-bench-serve-" + std::to_string(::getpid()));
  model::model_spec spec;
  spec.seed = 7;
  if (status w = model::write_random_model(spec, h.dir.string()); !w) return w;
  if (status e = start_engine(o, h); !e) return e;
  return o.actors ? start_actors(o, h) : ok_status();
}

std::vector<level_result> run_levels(const serve_bench_options& o, harness& h) {
  const int vocab = h.loaded->config.vocab_size;
  auto body_for = [&](const std::string& model_name) {
    return [&, model_name](int i) {
      nlohmann::json b = {{"model", model_name},
                          {"prompt", prompt_ids(i, o.prompt_tokens, vocab)},
                          {"max_tokens", o.max_tokens},
                          {"temperature", 0},
                          {"ignore_eos", true},
                          {"stream", true},
                          {"stream_options", {{"include_usage", true}}}};
      return b.dump();
    };
  };
  const std::function<std::string(int)> engine_body = body_for(h.service->info().model_name);
  const std::function<std::string(int)> actors_body =
      o.actors ? body_for(h.topo->service().info().model_name) : engine_body;
  std::atomic<int64_t> direct_ids{int64_t{1} << 40};  // Apart from the HTTP layer's ids.
  auto direct_request = [&](int i) {
    serve::generation_request r;
    r.id = direct_ids++;
    r.prompt = prompt_ids(i, o.prompt_tokens, vocab);
    r.max_tokens = o.max_tokens;
    return r;
  };
  const uint16_t port = h.server->port();
  run_http_load({"127.0.0.1", port, 1, 2, engine_body});  // Warm-up.
  if (o.actors) run_http_load({"127.0.0.1", h.topo_server->port(), 1, 2, actors_body});
  std::vector<level_result> levels;
  for (int c : o.levels) {
    level_result l;
    l.concurrency = c;
    l.requests = std::max(o.min_requests, 4 * c);
    for (int half : {l.requests / 2, l.requests - l.requests / 2}) {
      append(l.http, run_http_load({"127.0.0.1", port, c, half, engine_body}));
      if (o.direct) append(l.direct, run_direct_load(*h.service, c, half, direct_request));
      if (o.actors) {
        append(l.actors, run_http_load({"127.0.0.1", h.topo_server->port(), c, half, actors_body}));
      }
    }
    levels.push_back(std::move(l));
  }
  return levels;
}

// Prompt tokens the topology's prefill workers computed so far (cache hits excluded).
int64_t prefilled_tokens(deploy::topology& topo) {
  int64_t total = 0;
  const nlohmann::json roles = nlohmann::json::parse(topo.service().status_json());
  for (const auto& r : roles) {
    if (r.contains("detail") && r["detail"].contains("tokens_prefilled")) {
      total += r["detail"]["tokens_prefilled"].get<int64_t>();
    }
  }
  return total;
}

// n choices from one request against n separate requests for the same prompt, with the same
// number of sequences in flight (n), on distinct prompts per mode so neither finds the other's.
// A topology of its own with two prefill and two decode workers, as deployments run: separate
// requests sent together are spread over the prefill workers, each computing the prompt.
result<choices_result> run_choices(const serve_bench_options& o, harness& h) {
  const int vocab = h.loaded->config.vocab_size;
  const int n = o.choices;
  config::manifest m = config::default_manifest(h.dir.string());
  m.prefill.count = 2;
  m.decode.count = 2;
  m.admission_queue = 4 * n + 16;
  m.decode.kv_tokens =
      std::max(m.decode.kv_tokens, n * (o.choices_prompt_tokens + o.max_tokens + 16));
  auto started = deploy::topology::start(m);
  if (!started) return started.err();
  std::unique_ptr<deploy::topology> topo = std::move(started.value());
  serve::api_handler handler(topo->service(), *h.tok, serve::api_handler_options{});
  serve::http_server_options ho;
  ho.port = 0;
  serve::http_server server(handler, ho);
  if (status listening = server.start(); !listening) return listening.err();
  const std::string name = topo->service().info().model_name;
  auto body = [&](int prompt, int choices, uint64_t seed) {
    nlohmann::json b = {{"model", name},
                        {"prompt", prompt_ids(prompt, o.choices_prompt_tokens, vocab)},
                        {"max_tokens", o.max_tokens},
                        {"temperature", 1.0},
                        {"seed", seed},
                        {"n", choices},
                        {"ignore_eos", true},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}};
    return b.dump();
  };
  choices_result out;
  auto run_mode = [&](choices_mode& mode, const http_load_options& load) {
    const int64_t before = prefilled_tokens(*topo);
    mode.load = run_http_load(load);
    mode.prefill_tokens = prefilled_tokens(*topo) - before;
  };
  run_http_load({"127.0.0.1", server.port(), 1, 2, [&](int i) { return body(40000 + i, 1, 0); }});
  run_mode(out.shared, {"127.0.0.1", server.port(), 1, o.choices_prompts,
                        [&](int i) { return body(20000 + i, n, static_cast<uint64_t>(i)); }});
  run_mode(out.separate, {"127.0.0.1", server.port(), n, n * o.choices_prompts,
                          [&](int i) { return body(30000 + i / n, 1, static_cast<uint64_t>(i)); }});
  server.stop();
  return out;
}

nlohmann::json choices_json(const serve_bench_options& o, const choices_result& c) {
  auto mode = [&](const choices_mode& m) {
    nlohmann::json j = figures(m.load);
    j["prefill_tokens"] = m.prefill_tokens;
    j["prefill_tokens_per_prompt"] = static_cast<double>(m.prefill_tokens) / o.choices_prompts;
    return j;
  };
  return {{"n", o.choices},
          {"prompts", o.choices_prompts},
          {"prompt_tokens", o.choices_prompt_tokens},
          {"shared", mode(c.shared)},
          {"separate", mode(c.separate)},
          {"prefill_tokens_separate_over_shared",
           ratio(static_cast<double>(c.separate.prefill_tokens), c.shared.prefill_tokens)},
          {"tokens_per_s_shared_over_separate",
           ratio(c.shared.load.output_tokens_per_s(), c.separate.load.output_tokens_per_s())}};
}

void print_choices(const serve_bench_options& o, const choices_result& c) {
  std::printf(
      "\nn = %d choices against %d separate requests, %d prompts of %d tokens, %d output "
      "tokens each; actor topology with 2 prefill and 2 decode workers, prefix cache on:\n",
      o.choices, o.choices, o.choices_prompts, o.choices_prompt_tokens, o.max_tokens);
  table t({"mode", "requests", "prefill tokens", "per prompt", "out tok/s", "TTFT p50", "errors"});
  auto row = [&](const char* label, const choices_mode& m) {
    const nlohmann::json f = figures(m.load);
    t.add_row({label, std::to_string(m.load.samples.size()), std::to_string(m.prefill_tokens),
               fixed(static_cast<double>(m.prefill_tokens) / o.choices_prompts, 1),
               fixed(m.load.output_tokens_per_s(), 1), fixed(f["ttft_ms_p50"].get<double>(), 1),
               std::to_string(m.load.errors)});
  };
  row(("one request, n=" + std::to_string(o.choices)).c_str(), c.shared);
  row((std::to_string(o.choices) + " requests").c_str(), c.separate);
  std::printf("%s", t.render().c_str());
  std::printf("prefill tokens, separate / shared: %.2f; output tokens/s, shared / separate: %.2f\n",
              ratio(static_cast<double>(c.separate.prefill_tokens), c.shared.prefill_tokens),
              ratio(c.shared.load.output_tokens_per_s(), c.separate.load.output_tokens_per_s()));
}

}  // namespace

int serve(int argc, char** argv) {
  serve_bench_options o;
  bool no_direct = false, no_actors = false, overhead_only = false;
  CLI::App app{"HTTP serving throughput and latency at several concurrencies",
               "brigade bench serve"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", o.json, "print one JSON object with every figure");
  app.add_option("--levels", o.levels, "concurrency levels")->delimiter(',')->capture_default_str();
  app.add_option("--min-requests", o.min_requests, "requests per level at least (4 x concurrency)")
      ->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens, "prompt length")->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens, "output tokens per request")->capture_default_str();
  app.add_flag("--no-direct", no_direct, "skip the runs straight into the engine service");
  app.add_flag("--no-actors", no_actors, "skip the runs against the actor topology");
  app.add_option("--choices", o.choices,
                 "n of the comparison of one n-choice request with n requests (below 2: skip)")
      ->capture_default_str();
  app.add_option("--choices-prompts", o.choices_prompts, "prompts in each mode of that comparison")
      ->capture_default_str();
  app.add_option("--choices-prompt-tokens", o.choices_prompt_tokens,
                 "prompt length in that comparison")
      ->capture_default_str();
  app.add_option("--overhead-batch", o.overhead_batch, "batch of the actor overhead measurement")
      ->capture_default_str();
  app.add_flag("--overhead-only", overhead_only,
               "measure only the actor overhead (no HTTP levels, no choices)");
  CLI11_PARSE(app, argc, argv);
  o.direct = !no_direct;
  o.actors = !no_actors;
  if (overhead_only) {
    o.levels.clear();
    o.choices = 0;
  }
  if (overhead_only && no_actors) {
    std::fprintf(stderr, "bench serve: --overhead-only measures the actors; drop --no-actors\n");
    return 2;
  }
  if ((o.levels.empty() && !overhead_only) || o.prompt_tokens < 1 || o.max_tokens < 1 ||
      o.overhead_batch < 1) {
    std::fprintf(stderr,
                 "bench serve: give at least one level, and positive token counts and "
                 "--overhead-batch\n");
    return 2;
  }

  harness h;
  if (status s = start_harness(o, h); !s) {
    std::fprintf(stderr, "bench serve: %s\n", s.err().message.c_str());
    return 1;
  }
  const std::vector<level_result> levels = run_levels(o, h);
  std::optional<choices_result> choices;
  if (o.actors && o.choices > 1) {
    std::fprintf(stderr, "comparing n=%d choices with %d separate requests ...\n", o.choices,
                 o.choices);
    auto c = run_choices(o, h);
    if (c) {
      choices = c.value();
    } else {
      std::fprintf(stderr, "bench serve: choices: %s\n", c.err().message.c_str());
    }
  }
  // The step-time overhead of the topology beside the engine, on the same model and batch.
  std::optional<overhead_figures> overhead;
  if (o.actors) {
    std::fprintf(stderr, "measuring the actor overhead at batch %d ...\n", o.overhead_batch);
    auto f = measure_actor_overhead(h.dir.string(), o.overhead_batch, o.overhead_steps, 4);
    if (f)
      overhead = f.value();
    else
      std::fprintf(stderr, "bench serve: actor overhead: %s\n", f.err().message.c_str());
  }
  std::ostringstream model_line;
  const auto& cfg = h.loaded->config;
  model_line << cfg.model_type << ", " << cfg.num_layers << " layers, hidden " << cfg.hidden_size
             << ", " << cfg.num_experts << " experts top-" << cfg.top_k << ", CPU backend";
  if (o.json) {
    nlohmann::json j = to_json(o, levels, model_line.str());
    if (overhead) {
      j["actor_step_overhead"] = {{"batch", overhead->batch},
                                  {"steps", overhead->steps},
                                  {"rounds", overhead->rounds},
                                  {"engine_step_ms", overhead->engine_step_ms},
                                  {"topology_step_ms", overhead->topology_step_ms},
                                  {"ratio", overhead->ratio()}};
    }
    if (choices) j["choices"] = choices_json(o, *choices);
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (!levels.empty()) print_table(o, levels, model_line.str());
    if (choices) print_choices(o, *choices);
    if (overhead) {
      std::printf(
          "\nactor overhead at batch %d (%d decode steps, 4 expert shards, median of %d "
          "alternating rounds): engine %.2f ms per step, topology %.2f ms per step: ratio %.3f%s\n",
          overhead->batch, overhead->steps, overhead->rounds, overhead->engine_step_ms,
          overhead->topology_step_ms, overhead->ratio(),
          overhead->batch == 32 ? " (goal <= 1.10)" : "");
    }
  }
  int errors = 0;
  for (const auto& l : levels)
    errors += l.http.errors + l.direct.errors + l.actors.errors;
  if (choices) errors += choices->shared.load.errors + choices->separate.load.errors;
  return errors == 0 ? 0 : 1;
}

}  // namespace brigade::bench

// `brigade serve [MANIFEST]`: the OpenAI-compatible HTTP server over the actor topology of a
// manifest (the embedded default without one), or over the single-process engine (--engine).
#include <pthread.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include "cli/commands.hpp"
#include "common/progress.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "gpu/backend.hpp"
#include "gpu/device_choice.hpp"
#include "model/chat_template.hpp"
#include "model/draft_model.hpp"
#include "model/kv_layout.hpp"
#include "model/loaded_model.hpp"
#include "model/tokenizer.hpp"
#include "serve/api_handler.hpp"
#include "serve/engine_service.hpp"
#include "serve/http_server.hpp"

namespace brigade::cli {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade serve: %s\n", message.c_str());
  return 1;
}

// "HOST:PORT" or "[V6]:PORT".
result<std::pair<std::string, uint16_t>> parse_listen(const std::string& text) {
  const size_t colon = text.rfind(':');
  const auto bad = error(errc::invalid_argument,
                         "--listen '" + text + "' must be HOST:PORT, e.g. 127.0.0.1:8000");
  if (colon == std::string::npos || colon + 1 == text.size()) return bad;
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  try {
    size_t used = 0;
    const int port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port < 0 || port > 65535) return bad;
    return std::make_pair(host, static_cast<uint16_t>(port));
  } catch (const std::exception&) {
    return bad;
  }
}

struct serve_options {
  std::string manifest_path;
  std::string model_dir;
  std::string listen;
  std::vector<std::string> api_keys;
  std::vector<std::string> admin_keys;
  std::string served_model_name;
  bool engine = false;
  std::string device;    ///< --device: empty keeps the manifest's devices.
  std::string kv_dtype;  ///< --kv-dtype: empty keeps the manifest's kv_dtype.
  // Overrides of the manifest's values; -1 keeps the manifest's.
  int speculate = -1;
  int draft_attention_window = -1;
  std::string draft_model;
  bool no_speculation_gate = false;
  int max_queued = -1;
  int max_running = -1;
  int kv_tokens = -1;
  int max_step_tokens = -1;
  int drain_timeout_s = 30;
  int stop_timeout_s = 10;
  serve::http_server_options http;
};

void add_options(CLI::App& app, serve_options& o) {
  app.add_option("manifest", o.manifest_path,
                 "cluster manifest (YAML); without one, the embedded default topology");
  app.add_option("--model", o.model_dir, "checkpoint directory (overrides the manifest's)");
  app.add_option("--listen", o.listen,
                 "HOST:PORT to listen on, port 0 picks a free one (default 127.0.0.1:8000)");
  app.add_flag("--engine", o.engine,
               "serve with the single-process engine instead of the actor topology");
  app.add_option("--device", o.device,
                 "cpu or cuda:N: where the engine runs with --engine; without it, the device of "
                 "every role (overrides roles.*.device and the nodes' device)")
      ->default_str("cpu, or the manifest's");
  app.add_option("--api-key", o.api_keys,
                 "accept this Bearer key on /v1/ (repeatable; without one, /v1/ is open; "
                 "replaces serve.api_keys, bound cache salts included)")
      ->default_str("");
  app.add_option("--admin-key", o.admin_keys,
                 "only this Bearer key opens /v1/admin/* (repeatable; replaces "
                 "serve.admin_keys; docs/serve.md has the rule without one)")
      ->default_str("");
  app.add_option("--speculate", o.speculate,
                 "draft up to N tokens per decode step, 0 turns it off (overrides the "
                 "manifest's roles.decode.speculation.max_draft)")
      ->check(CLI::Range(0, 64))
      ->default_str("the manifest's");
  app.add_option("--draft-model", o.draft_model,
                 "draft with this small dense model of the same tokenizer instead of prompt "
                 "lookup, up to 5 tokens per step unless --speculate or the manifest says "
                 "otherwise (overrides roles.decode.speculation.draft_model; on nodes, the "
                 "directory must exist on each node that runs a decode worker)")
      ->default_str("");
  app.add_option("--draft-attention-window", o.draft_attention_window,
                 "positions the draft model attends to, the most recent, 0 for all (overrides "
                 "roles.decode.speculation.draft_attention_window)")
      ->check(CLI::Range(0, 1 << 24))
      ->default_str("the manifest's");
  app.add_flag("--no-speculation-gate", o.no_speculation_gate,
               "draft in every decode step, even where the decode worker measured drafting "
               "slower per token than plain decoding (sets "
               "roles.decode.speculation.measured_gate false)");
  app.add_option("--served-model-name", o.served_model_name,
                 "the name clients send as \"model\" (overrides serve.model_name; default the "
                 "model directory's name)")
      ->default_str("");
  app.add_option("--max-queued", o.max_queued,
                 "requests waiting to run before 429 (overrides serve.admission_queue)")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("the manifest's");
  app.add_option("--max-running", o.max_running,
                 "sequences in one decode step (overrides roles.decode.max_running)")
      ->check(CLI::Range(1, 4096))
      ->default_str("the manifest's");
  app.add_option("--kv-tokens", o.kv_tokens,
                 "KV capacity of a decode worker in tokens (overrides roles.decode.kv_tokens)")
      ->check(CLI::Range(1, 1 << 28))
      ->default_str("the manifest's");
  app.add_option("--max-step-tokens", o.max_step_tokens,
                 "prompt tokens per prefill step (overrides roles.prefill.max_step_tokens)")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("the manifest's");
  app.add_option("--kv-dtype", o.kv_dtype,
                 "the KV cache's element type, f32 or bf16 (half the KV memory; overrides "
                 "kv_dtype)")
      ->default_str("the manifest's");
  app.add_option("--io-threads", o.http.io_threads, "HTTP I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-connections", o.http.max_connections, "open connections at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.http.max_body_bytes, "largest request body")
      ->check(CLI::Range(size_t{1}, size_t{1} << 34))
      ->capture_default_str();
  app.add_option("--drain-timeout-s", o.drain_timeout_s,
                 "on SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--stop-timeout-s", o.stop_timeout_s,
                 "after the drain, how long stopping may take before the process exits anyway; "
                 "a second signal exits at once")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
}

std::vector<int32_t> eos_ids(const model::model_config& config, const model::tokenizer& tok) {
  std::set<int32_t> ids(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tok.eos_id()) ids.insert(*tok.eos_id());
  return {ids.begin(), ids.end()};
}

// The manifest to serve: the file's, or the embedded default, with command-line overrides.
result<config::manifest> manifest_for(const serve_options& o) {
  config::manifest m = config::default_manifest(BRIGADE_DEFAULT_MODEL_DIR);
  if (!o.manifest_path.empty()) {
    auto loaded = config::load_manifest(o.manifest_path);
    if (!loaded) return loaded.err();
    m = loaded.value();
  }
  if (!o.model_dir.empty()) m.model = o.model_dir;
  if (!o.listen.empty()) m.listen = o.listen;
  if (!o.api_keys.empty()) m.api_keys = serve::unbound_keys(o.api_keys);
  if (!o.admin_keys.empty()) m.admin_keys = o.admin_keys;
  if (!o.served_model_name.empty()) m.served_model_name = o.served_model_name;
  if (!o.draft_model.empty()) {
    m.decode.speculation.draft = model::draft_kind::model;
    m.decode.speculation.draft_model = o.draft_model;
    if (m.decode.speculation.max_draft == 0) {
      m.decode.speculation.max_draft = model::default_model_drafts;
    }
  }
  if (o.speculate >= 0) m.decode.speculation.max_draft = o.speculate;
  if (o.draft_attention_window >= 0) {
    m.decode.speculation.draft_attention_window = o.draft_attention_window;
  }
  if (o.no_speculation_gate) m.decode.speculation.measured_gate = false;
  if (o.max_queued > 0) m.admission_queue = o.max_queued;
  if (o.max_running > 0) m.decode.max_running = o.max_running;
  if (o.kv_tokens > 0) m.decode.kv_tokens = o.kv_tokens;
  if (o.max_step_tokens > 0) m.prefill.max_step_tokens = o.max_step_tokens;
  if (!o.device.empty()) {
    auto device = gpu::parse_device(o.device, "--device");
    if (!device) return device.err();
    m.prefill.device = m.decode.device = m.experts.device = device.value();
    for (config::node_spec& n : m.nodes) {
      n.device = device.value();
      n.prefill_device = n.decode_device = n.expert_shard_device = std::nullopt;
    }
  }
  if (!o.kv_dtype.empty()) {
    auto kv = model::parse_kv_dtype(o.kv_dtype, "--kv-dtype");
    if (!kv) return kv.err();
    m.kv_dtype = kv.value();
  }
  status keys = config::check_keys(m);
  if (!keys && (!o.api_keys.empty() || !o.admin_keys.empty())) {
    return error(keys.err().code, keys.err().message + " (with --api-key and --admin-key)");
  }
  if (!keys) return keys.err();
  return m;
}

// What serves the requests: the actor topology, or the single-process engine.
struct backend_service {
  std::unique_ptr<deploy::topology> topology;
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<model::loaded_model> model;
  std::unique_ptr<serve::engine_service> engine;

  serve::inference_service& service() {
    return topology ? topology->service() : static_cast<serve::inference_service&>(*engine);
  }
  const model::model_config& config() const {
    return topology ? topology->config() : model->config;
  }
  void stop() {
    if (engine) engine->stop();
    topology.reset();
  }
};

result<backend_service> start_service(const serve_options& o, const config::manifest& m) {
  backend_service b;
  progress_bar bar("loading " + m.model);
  auto progress = [&](size_t done, size_t total) { bar.update(done, total); };
  if (o.engine) {
    // The engine is one decode worker's work: it runs on the decode workers' device.
    const gpu::device_choice& device = m.decode.device;
    auto made = gpu::open_backend(device, "serve --engine");
    if (!made) return made.err();
    b.dev = std::move(made.value());
    auto loaded = model::loaded_model::load(m.model, *b.dev, true, progress);
    if (!loaded) return loaded.err();
    b.model = std::move(loaded.value());
    // The engine runs what the manifest gives one decode worker and one prefill worker.
    serve::engine_service_options opt;
    opt.model_name = m.served_model_name;
    opt.max_queued = m.admission_queue;
    opt.engine.max_running = m.decode.max_running;
    opt.engine.kv_tokens = m.decode.kv_tokens;
    opt.engine.max_step_tokens = m.prefill.max_step_tokens;
    opt.engine.block_tokens = m.block_tokens;
    opt.engine.kv_dtype = m.kv_dtype;
    opt.engine.speculation = m.decode.speculation;
    if (m.decode.speculation.enabled() && m.decode.speculation.draft == model::draft_kind::model) {
      auto draft = model::draft_model::load(m.decode.speculation.draft_model, b.model->config,
                                            m.model, *b.dev);
      if (!draft) {
        return error(
            draft.err().code,
            m.source + ": field 'roles.decode.speculation.draft_model': " + draft.err().message);
      }
      opt.engine.draft_weights = draft.value();
      // The draft directory's confidence head, when it has one, as the decode workers use it.
      auto head = model::confidence_head::for_draft(m.decode.speculation.draft_model, "");
      if (!head) return head.err();
      opt.engine.confidence_head = head.value();
    }
    b.engine = std::make_unique<serve::engine_service>(*b.model, *b.dev, opt);
    b.engine->start();
  } else {
    auto topo = deploy::topology::start(m, progress);
    if (!topo) return topo.err();
    b.topology = std::move(topo.value());
  }
  bar.finish();
  return b;
}

// A stop that does not finish in time, or a second signal, ends the process there and says what
// was still going on: a server that ignores SIGTERM gets killed without a word.
void force_exit_later(sigset_t signals, std::chrono::seconds timeout,
                      const serve::http_server* server) {
  std::thread([signals, timeout, server] {
    const timespec wait{static_cast<time_t>(timeout.count()), 0};
    const int again = sigtimedwait(&signals, nullptr, &wait);
    std::fprintf(stderr,
                 "brigade serve: %s; exiting now with %d requests in flight and the topology "
                 "stopping\n",
                 again > 0 ? "a second signal" : "the stop timed out",
                 server->active_generations());
    std::fflush(stderr);
    std::_Exit(again > 0 ? 130 : 1);
  }).detach();
}

// Stops taking requests, lets those in flight finish for up to drain_timeout_s, then stops.
void shut_down(serve::http_server& server, backend_service& service, int drain_timeout_s) {
  server.stop_accepting();
  const int in_flight = server.active_generations();
  std::printf("brigade serve: shutting down; %d requests in flight (waiting up to %d s)\n",
              in_flight, drain_timeout_s);
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_timeout_s);
  while (server.active_generations() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server.stop();
  service.stop();
}

}  // namespace

int serve(int argc, char** argv) {
  serve_options o;
  CLI::App app{"Serve the OpenAI API (/v1/completions, /v1/chat/completions) over HTTP",
               "brigade serve"};
  app.option_defaults()->always_capture_default();
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  auto manifest = manifest_for(o);
  if (!manifest) return fail(manifest.err().message);
  const config::manifest& m = manifest.value();
  auto listen = parse_listen(m.listen);
  if (!listen) return fail(listen.err().message);
  o.http.host = listen->first;
  o.http.port = listen->second;

  // Every thread started from here on inherits the blocked signals; main() waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto tok = model::tokenizer::load(m.model);
  if (!tok) return fail(tok.err().message + " (serving needs the model's tokenizer.json)");
  // Before the weights load: a chat format brigade cannot render is refused at once.
  auto chat = model::load_chat_style(m.model, m.chat_format);
  if (!chat) return fail(chat.err().message);
  auto started_service = start_service(o, m);
  if (!started_service) return fail(started_service.err().message);
  backend_service& service = started_service.value();
  serve::api_handler_options handler_options;
  handler_options.api_keys = m.api_keys;
  handler_options.eos_ids = eos_ids(service.config(), tok.value());
  handler_options.admin_keys = m.admin_keys;
  handler_options.listen_host = o.http.host;
  handler_options.admin_without_key = m.admin_without_key;
  handler_options.chat = chat.value();
  serve::api_handler handler(service.service(), tok.value(), handler_options);
  serve::http_server server(handler, o.http);
  if (status started = server.start(); !started) return fail(started.err().message);
  std::printf("brigade serve: serving '%s' at %s (OpenAI API under /v1) with %s%s\n",
              service.service().info().model_name.c_str(), server.url().c_str(),
              o.engine ? "the single-process engine" : "the actor topology",
              m.api_keys.empty() ? "" : ", API keys required");
  std::printf("brigade serve: %s\n", serve::describe(handler.admin()).c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  force_exit_later(signals, std::chrono::seconds(o.drain_timeout_s + o.stop_timeout_s), &server);
  shut_down(server, service, o.drain_timeout_s);
  std::printf("brigade serve: stopped\n");
  return 0;
}

}  // namespace brigade::cli

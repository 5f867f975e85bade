// `brigade serve`: the OpenAI-compatible HTTP server over the single-process engine.
#include <pthread.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <set>
#include <thread>

#include "cli/commands.hpp"
#include "common/progress.hpp"
#include "gpu/backend.hpp"
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
  std::string model_dir = BRIGADE_DEFAULT_MODEL_DIR;
  std::string listen = "127.0.0.1:8000";
  std::vector<std::string> api_keys;
  int drain_timeout_s = 30;
  serve::engine_service_options service;
  serve::http_server_options http;
};

void add_options(CLI::App& app, serve_options& o) {
  app.add_option("--model", o.model_dir, "checkpoint directory (default: the embedded model)");
  app.add_option("--listen", o.listen, "HOST:PORT to listen on; port 0 picks a free one")
      ->capture_default_str();
  app.add_option("--api-key", o.api_keys, "accept this Bearer key on /v1/ (repeatable)");
  app.add_option("--served-model-name", o.service.model_name,
                 "the name clients send as \"model\" (default: the directory's name)");
  app.add_option("--max-queued", o.service.max_queued, "requests waiting to run before 429")
      ->capture_default_str();
  app.add_option("--max-running", o.service.engine.max_running, "sequences decoding at once")
      ->capture_default_str();
  app.add_option("--kv-tokens", o.service.engine.kv_tokens, "KV cache capacity in tokens")
      ->capture_default_str();
  app.add_option("--max-step-tokens", o.service.engine.max_step_tokens, "tokens per engine step")
      ->capture_default_str();
  app.add_option("--io-threads", o.http.io_threads, "HTTP I/O threads")->capture_default_str();
  app.add_option("--max-connections", o.http.max_connections, "open connections at most")
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.http.max_body_bytes, "largest request body")
      ->capture_default_str();
  app.add_option("--drain-timeout-s", o.drain_timeout_s,
                 "on SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ->capture_default_str();
}

std::vector<int32_t> eos_ids(const model::model_config& config, const model::tokenizer& tok) {
  std::set<int32_t> ids(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tok.eos_id()) ids.insert(*tok.eos_id());
  return {ids.begin(), ids.end()};
}

// Stops taking requests, lets those in flight finish for up to drain_timeout_s, then stops.
void shut_down(serve::http_server& server, serve::engine_service& service, int drain_timeout_s) {
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
  o.service.engine.kv_tokens = 65536;
  CLI::App app{"Serve the OpenAI API (/v1/completions, /v1/chat/completions) over HTTP",
               "brigade serve"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  auto listen = parse_listen(o.listen);
  if (!listen) return fail(listen.err().message);
  o.http.host = listen->first;
  o.http.port = listen->second;

  // Every thread started from here on inherits the blocked signals; main() waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto tok = model::tokenizer::load(o.model_dir);
  if (!tok) return fail(tok.err().message + " (serving needs the model's tokenizer.json)");
  auto dev = gpu::make_cpu_backend();
  progress_bar bar("loading " + o.model_dir);
  auto loaded = model::loaded_model::load(
      o.model_dir, *dev, true, [&](size_t done, size_t total) { bar.update(done, total); });
  if (!loaded) return fail(loaded.err().message);
  bar.finish();
  const model::model_config& config = loaded.value()->config;

  serve::engine_service service(*loaded.value(), *dev, o.service);
  service.start();
  serve::api_handler handler(service, tok.value(), {o.api_keys, eos_ids(config, tok.value())});
  serve::http_server server(handler, o.http);
  if (status started = server.start(); !started) return fail(started.err().message);
  std::printf("brigade serve: serving '%s' at %s (OpenAI API under /v1)%s\n",
              service.info().model_name.c_str(), server.url().c_str(),
              o.api_keys.empty() ? "" : ", API keys required");
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  shut_down(server, service, o.drain_timeout_s);
  std::printf("brigade serve: stopped\n");
  return 0;
}

}  // namespace brigade::cli

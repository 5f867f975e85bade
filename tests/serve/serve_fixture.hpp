// A tiny generated model and an in-process server over the real engine, for the serve tests.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"
#include "model/tokenizer.hpp"
#include "serve/api_handler.hpp"
#include "serve/engine_service.hpp"
#include "serve/http_client.hpp"
#include "serve/http_server.hpp"

namespace brigade::serve::testing {

/// A 2-layer MoE model with a 256-token context, written and loaded once per test binary.
struct test_model {
  std::string dir;
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<model::loaded_model> loaded;
  std::unique_ptr<model::tokenizer> tok;
};
const test_model& shared_model();

constexpr const char* model_name = "tiny";

/// Forwards to a real service and records cancel() calls. With a gate set, the engine thread
/// blocks in a callback after `gate_after_tokens` tokens of a request until open_gate(): the
/// request then provably cannot finish before the test has done its part.
class recording_service final : public inference_service {
 public:
  explicit recording_service(inference_service& inner) : inner_(inner) {}

  status submit(generation_request request, std::shared_ptr<generation_sink> sink) override;
  void cancel(int64_t request_id) override;
  service_info info() const override { return inner_.info(); }
  bool ready() const override { return inner_.ready(); }
  /// Throws while fail_actors_json is set: a fault in answering one request.
  std::string actors_json() const override;
  std::string status_json() const override { return inner_.status_json(); }
  void collect_metrics(metrics::registry& into) const override { inner_.collect_metrics(into); }

  void set_gate(int after_tokens) { gate_after_tokens_ = after_tokens; }
  std::atomic<bool> fail_actors_json{false};
  void open_gate();
  /// Waits (at most 60 s) until cancel() was called for some request; returns its id or -1.
  int64_t wait_for_cancel();
  /// Waits (at most 60 s) until every submitted request ended; returns how many ended.
  bool wait_until_all_ended();
  std::set<int64_t> cancelled() const;
  /// The cache_salt of every request submitted so far, in order.
  std::vector<std::string> submitted_salts() const;

  struct outcome {
    int tokens = 0;
    bool finished = false;
    errc error_code = errc::internal;
    bool errored = false;
  };
  outcome outcome_of(int64_t id) const;

 private:
  class sink_wrapper;
  friend class sink_wrapper;
  void record(int64_t id, const outcome& o, bool ended);
  void gate_wait();

  inference_service& inner_;
  std::atomic<int> gate_after_tokens_{0};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool gate_open_ = false;
  std::set<int64_t> cancelled_;
  std::vector<std::string> salts_;
  std::map<int64_t, outcome> outcomes_;
  int live_ = 0;
};

struct server_options {
  std::vector<api_key> api_keys;
  std::vector<std::string> admin_keys;
  std::string host = "127.0.0.1";  ///< Where the server listens; clients dial 127.0.0.1.
  bool admin_without_key = false;
  int max_queued = 64;
  bool start_service = true;
  int max_connections = 64;
  size_t max_body_bytes = 1 << 20;
  int speculate = 0;  ///< Prompt-lookup drafts per step; 0: off.
};

/// engine_service -> recording_service -> api_handler -> http_server on a free port.
struct test_server {
  explicit test_server(const server_options& options = {});
  ~test_server();

  uint16_t port() const { return http->port(); }
  std::unique_ptr<http_client> client() const;

  std::unique_ptr<engine_service> engine;
  std::unique_ptr<recording_service> recorder;
  std::unique_ptr<api_handler> handler;
  std::unique_ptr<http_server> http;
};

/// Parses a JSON body, failing the test with the body when it is not JSON.
nlohmann::json parse_json(const std::string& body);

}  // namespace brigade::serve::testing

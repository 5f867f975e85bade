// Routing and answering HTTP requests, apart from the sockets: the Beast session hands each
// parsed request here and gets back either a reply to write now or a generation to start.
//
//   GET  /health                  200 while the process runs
//   GET  /ready                   200 once the service accepts requests, 503 before
//   GET  /metrics                 Prometheus text
//   GET  /v1/models[/NAME]        the served model            (API key)
//   GET  /v1/actors               the registry snapshot        (API key)
//   GET  /v1/status               every role's queue and steps (API key)
//   GET  /v1/experts              expert layout and balance    (API key)
//   GET  /v1/events               expert-balancing events, SSE (API key)
//   POST /v1/admin/kill           fault injection: {"actor": "decode-0"}  (admin)
//   POST /v1/admin/replan         a random migration: {"seed": 5}, and with "kill":
//                                 "expert_shard-2" that actor dies as it starts  (admin)
//   POST /v1/admin/faults         a fault on a node: {"node": "n2", "kind": "drop", "rate": 0.1,
//                                 "for_ms": 5000}  (admin)
//   POST /v1/completions          OpenAI completions           (API key)
//   POST /v1/chat/completions     OpenAI chat completions      (API key)
//
// (API key): with API keys configured, one of them or an admin key; without, open.
// (admin): as serve/admin_access.hpp decides from the keys and the listening address.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/metrics.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "serve/admin_access.hpp"
#include "serve/api_error.hpp"
#include "serve/auth.hpp"
#include "serve/generation_stream.hpp"
#include "serve/inference_service.hpp"
#include "serve/request_metrics.hpp"

namespace brigade::serve {

/// The parts of an HTTP request the API looks at.
struct http_request_view {
  std::string_view method;
  std::string_view target;
  std::string_view authorization;
  std::string_view body;
};

/// A complete (not streamed) HTTP answer.
struct http_reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;              ///< The Allow header of a 405.
  bool www_authenticate = false;  ///< Sends "WWW-Authenticate: Bearer" (401).
};

/// The generations of one answer (one per choice), with the stream that turns their tokens into
/// the answer.
struct generation_start {
  /// The generations: prompt p's choice i is requests[p * best_of + i], seeded choice_seed(seed,
  /// i) (a prompt of a list answers as it would alone). Ids are unique, not consecutive.
  std::vector<generation_request> requests;
  /// Per request: -1 to submit it at once, else the request whose first output releases it.
  /// A prompt's first choice goes alone and its other choices once it produced its first token:
  /// its prompt is then in the prefix cache, so they compute only what the cache lacks (one
  /// prefill, not n).
  std::vector<int> waits_for;
  std::unique_ptr<generation_stream> stream;
};

/// An event stream to start: the expert-balancing events after sequence number `since`.
struct event_stream_start {
  uint64_t since = 0;
};

struct api_handler_options {
  std::vector<api_key> api_keys;  ///< Empty: the ordinary routes are open.
  std::vector<int32_t> eos_ids;   ///< Stop ids of every request unless it sets ignore_eos.
  /// Keys for the admin routes; they open the ordinary routes too, bound to no cache salt.
  std::vector<std::string> admin_keys;
  std::string listen_host = "127.0.0.1";  ///< Where the server listens (admin_access_for).
  bool admin_without_key = false;         ///< Opens keyless admin routes off loopback.
  /// The chat format, decided at start (model::load_chat_style). Without one, the format of the
  /// served model_type (model::chat_format_for) with the family's usual special tokens.
  std::optional<model::chat_style> chat;
};

class api_handler {
 public:
  using clock = std::chrono::steady_clock;

  /// `service` and `tok` must outlive the handler.
  api_handler(inference_service& service, const model::tokenizer& tok,
              const api_handler_options& options);

  using outcome = std::variant<http_reply, generation_start, event_stream_start>;

  /// A reply to write now, a generation to submit, or an event stream to run. It never throws:
  /// an exception while answering becomes a 500 for this request alone.
  outcome handle(const http_request_view& req, clock::time_point received);
  /// SSE events for everything after `since`, which moves to the last event sent. Never throws.
  std::string next_events(uint64_t& since) noexcept;
  /// The reply when submit() refused a generation (400, 429 or 503).
  http_reply refused(const error& err);
  /// A reply holding an OpenAI error object.
  static http_reply error_reply(const api_error& e);

  inference_service& service() { return service_; }
  /// Who may call /v1/admin/*, decided once from the options.
  admin_access admin() const { return admin_access_; }
  request_metrics& metrics() { return request_metrics_; }
  /// Everything /metrics shows: the service's metrics and the request metrics.
  std::string metrics_text();

 private:
  outcome route(const http_request_view& req, clock::time_point received);
  std::optional<http_reply> refuse_caller(const http_request_view& req, std::string_view path,
                                          std::string& bound_salt) const;
  std::optional<http_reply> refuse_admin(std::string_view authorization) const;
  outcome start_generation(api_kind kind, std::string_view body, std::string_view bound_salt,
                           clock::time_point received);
  request_context context_for(int64_t id) const;
  http_reply tokenize(std::string_view body) const;
  http_reply detokenize(std::string_view body) const;
  http_reply admin_kill(std::string_view body);
  http_reply admin_replan(std::string_view body);
  http_reply admin_faults(std::string_view body);
  http_reply get_route(std::string_view path);

  inference_service& service_;
  const model::tokenizer& tok_;
  api_key_auth auth_;
  api_key_auth admin_auth_;
  admin_access admin_access_;
  std::vector<int32_t> eos_ids_;
  std::optional<model::chat_style> chat_;
  uint64_t seed_base_;
  std::atomic<int64_t> next_id_{1};
  std::mutex scrape_mutex_;
  metrics::registry registry_;
  request_metrics request_metrics_;
};

}  // namespace brigade::serve

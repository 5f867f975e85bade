// The one interface between the HTTP layer and whatever generates tokens behind it.
//
// The HTTP server knows nothing else about the backend: engine_service runs the single-process
// engine on a thread; deploy/router_service.hpp puts the actor topology's router behind it.
// Nothing here includes network or actor headers.
//
// One request's life, as a service must report it:
//
//   submit() --error--> (nothing more; the caller answers 400, 429 or 503 itself)
//      |
//      ok: submit never waits for the backend, whose own verdict comes through the sink
//      v
//   on_error(error) ------------------------------> refused (400, 429, 503): nothing more
//   on_accepted() --> on_tokens()* --> on_finished(reason, usage)     normal end
//                                  \-> on_error(error)                failure, shutdown, cancel()
//
// Exactly one of on_finished / on_error follows every successful submit, then no more calls.
// An on_error before on_accepted is a refusal: no token was produced, and the caller answers it
// as it would a refusal from submit().
// Callbacks come from service threads, never two at once for one request, in token order. They
// must return quickly (post the work elsewhere): the service may call them from its step loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "model/logprobs.hpp"
#include "model/sampler.hpp"

namespace brigade::metrics {
class registry;
}

namespace brigade::serve {

/// What a client asked to generate, already tokenized and validated by the HTTP layer.
struct generation_request {
  int64_t id = 0;               ///< Unique per service, chosen by the caller (cancel() takes it).
  std::vector<int32_t> prompt;  ///< Prompt token ids, at least one.
  int max_tokens = 16;          ///< Tokens to generate at most (>= 1).
  model::sampling_params sampling;
  std::vector<int32_t> stop_ids;  ///< Generation ends after producing one of these.
  std::string scenario =
      "chat";  ///< Traffic class (brigade's "scenario" extension): cache retention.
  /// Log-probabilities with each token: -1 none; 0 the chosen token's; n also the n likeliest
  /// (at most model::max_top_logprobs).
  int top_logprobs = -1;
  /// Log-probabilities of the prompt's tokens after the first (the model's raw distribution:
  /// model::append_prompt_logprobs): -1 none; n also the n likeliest. A prefix-cache hit holds
  /// no logits, so a request asking for them computes its whole prompt.
  int prompt_logprobs = -1;
  /// The id of a request of this service with the same prompt (an answer's first choice), or 0:
  /// a service with a prefix cache computes this one where that one's prompt is cached.
  int64_t same_prompt_as = 0;
  /// The prefix-cache namespace (issue 29): mixed into the first block's hash, so that this
  /// request shares cached KV only with requests of the same salt. The API key's bound salt and
  /// the client's `cache_salt` field, combined by the HTTP layer; empty: the shared namespace.
  std::string cache_salt;
};

/// Why a generation ended.
enum class finish_reason {
  stop_token,    ///< It produced one of the request's stop ids.
  max_tokens,    ///< It produced max_tokens tokens.
  context_full,  ///< The sequence filled the model's context.
};

/// "stop" or "length", as the OpenAI API names the reason.
const char* openai_finish_reason(finish_reason r);

/// Token counts of a finished request.
struct generation_usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  ///< Prompt tokens served from the prefix cache (0 without one).
};

/// Receives one request's output. See the lifecycle at the top of this file.
class generation_sink {
 public:
  virtual ~generation_sink() = default;
  /// The service admitted the request: it waits for a worker or runs. Comes before any tokens.
  virtual void on_accepted() {}
  /// New tokens, in order (usually one per engine step).
  virtual void on_tokens(const std::vector<int32_t>& tokens) = 0;
  /// Log-probabilities of the tokens of the on_tokens call that follows, one per token, when the
  /// request asked for them (generation_request::top_logprobs).
  virtual void on_logprobs(const std::vector<model::position_logprobs>& logprobs) {
    (void)logprobs;
  }
  /// The prompt's log-probabilities (generation_request::prompt_logprobs), one per prompt token
  /// after the first, once, before the first on_tokens.
  virtual void on_prompt_logprobs(const std::vector<model::position_logprobs>& logprobs) {
    (void)logprobs;
  }
  /// How many prompt tokens the prefix cache served, once known (before the tokens that follow
  /// it; again if a retry changed it). A request stopped early (a stop string) reports it from
  /// here, as no on_finished comes.
  virtual void on_cached(int cached_tokens) { (void)cached_tokens; }
  virtual void on_finished(finish_reason reason, const generation_usage& usage) = 0;
  /// errc::cancelled after cancel(), errc::unavailable when the service shuts down.
  virtual void on_error(const error& err) = 0;
};

/// What the service serves, for /v1/models and request validation.
struct service_info {
  std::string model_name;      ///< The name clients put in "model".
  std::string model_type;      ///< Hugging Face model_type (chooses the chat format).
  int context_tokens = 0;      ///< Prompt plus generated tokens may not exceed this.
  int vocab_size = 0;          ///< Token ids are in [0, vocab_size).
  int64_t created_unix_s = 0;  ///< When the service started, for /v1/models.
  /// The scenarios a request may name (cache retention classes); empty: any valid name.
  std::vector<std::string> scenarios;
  /// Identical prompts share their KV through a prefix cache, so the choices of an n > 1
  /// request are started after the first one's prompt is computed.
  bool prefix_cache = false;
};

/// A fault to inject on one node of a topology (POST /v1/admin/faults).
struct fault_request {
  std::string node;  ///< The node it applies to.
  /// drop, delay, duplicate, reorder or sever (data-plane messages), partition (drop both
  /// ways between the node and `peer`), disk_slow, disk_full (its SSD tier), or clear.
  std::string kind;
  std::string peer;    ///< Another node, "*" for all of them, or empty for any destination.
  double rate = 1.0;   ///< Share of matching messages affected.
  int64_t ms = 0;      ///< delay and reorder: how long; disk_slow: per I/O.
  int64_t for_ms = 0;  ///< Lasts this long, then clears itself; 0: until cleared.
  uint64_t seed = 1;   ///< Seeds which messages a rate picks.
};

class inference_service {
 public:
  virtual ~inference_service() = default;

  /// Starts a request without waiting for the backend. Errors here or as the sink's on_error
  /// before on_accepted: invalid_argument (the request can never run: answer 400),
  /// resource_exhausted (the admission queue is full: answer 429), unavailable (shutting down:
  /// answer 503). On success the sink gets exactly one terminal callback.
  virtual status submit(generation_request request, std::shared_ptr<generation_sink> sink) = 0;
  /// Stops a request (client gone, stop string matched). Its sink then gets on_error(cancelled)
  /// unless it already finished. Unknown or finished ids are ignored.
  virtual void cancel(int64_t request_id) = 0;

  virtual service_info info() const = 0;
  /// True once the service accepts requests (model loaded, workers up), for /ready.
  virtual bool ready() const = 0;
  /// The registry of live actors (or the engine's equivalent) as a JSON object text.
  virtual std::string actors_json() const = 0;
  /// Sets the service's own metrics (running and waiting requests, ...) in `into`; called at
  /// each /metrics scrape, so gauges can be read fresh.
  virtual void collect_metrics(metrics::registry& into) const = 0;

  // Introspection of the expert layout and fault injection. Services without experts (the
  // single-process engine) keep the defaults.

  /// GET /v1/status: every role actor's queue depth, in-flight work and last step, as JSON.
  virtual std::string status_json() const { return "[]"; }
  /// GET /v1/experts: layout, per-shard load per window, balancedness history, migrations.
  virtual std::string experts_json() const { return "null"; }
  /// The expert-balancing events after sequence number `since`, as a JSON array of objects
  /// with a "seq" and a "kind" (the /v1/events stream).
  virtual std::string events_json(uint64_t since) const {
    (void)since;
    return "[]";
  }
  /// Fault injection: starts a migration to a random layout of the experts (the same for the
  /// same seed and current layout) and, when `kill` names an actor, kills it as the migration
  /// starts; an error when the migration cannot start (one already runs) or `kill` names no
  /// live actor (not_found; nothing starts then).
  virtual status replan_randomly(uint64_t seed, const std::string& kill) {
    (void)seed;
    (void)kill;
    return error(errc::unsupported, "this service has no expert layout to re-plan");
  }
  /// Fault injection: kills the named actor, which the supervisor then restarts.
  virtual status kill_actor(const std::string& name) {
    return error(errc::unsupported, "this service has no actors to kill ('" + name + "')");
  }
  /// Fault injection: switches a fault on (or off) on one node of the topology.
  virtual status inject_fault(const fault_request& fault) {
    return error(errc::unsupported,
                 "this service has no nodes to inject faults into ('" + fault.node + "')");
  }
};

}  // namespace brigade::serve

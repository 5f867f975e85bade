#include "serve/engine_service.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "model/draft_model.hpp"
#include "model/speculation_json.hpp"
#include "serve/speculation_metrics.hpp"

namespace brigade::serve {
namespace {

std::string last_path_part(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/')
    d.pop_back();
  const size_t slash = d.find_last_of('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

finish_reason from_engine(model::finish_reason r) {
  switch (r) {
    case model::finish_reason::stop:
      return finish_reason::stop_token;
    case model::finish_reason::context:
      return finish_reason::context_full;
    case model::finish_reason::length:
    case model::finish_reason::none:
      break;
  }
  return finish_reason::max_tokens;
}

}  // namespace

engine_service::engine_service(const model::loaded_model& model, gpu::backend& dev,
                               const engine_service_options& options)
    : options_(options), engine_(model, dev, options.engine) {
  info_.model_name = options.model_name.empty() ? last_path_part(model.dir) : options.model_name;
  info_.model_type = model.config.model_type;
  info_.context_tokens = model.config.max_positions;
  info_.vocab_size = model.config.vocab_size;
  // The engine has no prefix cache; it knows the default retention classes all the same.
  info_.scenarios = {"chat", "agent"};
  info_.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
}

engine_service::~engine_service() {
  stop();
}

void engine_service::start() {
  if (started_.exchange(true)) return;
  thread_ = std::thread([this] { run(); });
}

void engine_service::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  stopping_flag_ = true;
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The engine thread is gone (or never ran): whatever is left is failed from here.
  fail_all(error(errc::unavailable, "the server is shutting down; retry on another server"));
}

status engine_service::submit(generation_request request, std::shared_ptr<generation_sink> sink) {
  const auto& r = request;
  if (r.prompt.empty()) return error(errc::invalid_argument, "the prompt has no tokens");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= info_.vocab_size) {
      return error(errc::invalid_argument, "prompt token id " + std::to_string(t) +
                                               " is outside the vocabulary [0, " +
                                               std::to_string(info_.vocab_size) + ")");
    }
  }
  if (r.max_tokens < 1) return error(errc::invalid_argument, "max_tokens must be at least 1");
  if (status ok = model::check_sampling(r.sampling, info_.vocab_size); !ok) return ok;
  if (r.top_logprobs < -1 || r.top_logprobs > model::max_top_logprobs) {
    return error(errc::invalid_argument, "top_logprobs " + std::to_string(r.top_logprobs) +
                                             " is not in [-1, " +
                                             std::to_string(model::max_top_logprobs) + "]");
  }
  const int prompt_tokens = static_cast<int>(r.prompt.size());
  if (prompt_tokens >= info_.context_tokens) {
    return error(errc::invalid_argument, "the prompt has " + std::to_string(prompt_tokens) +
                                             " tokens; the model's context is " +
                                             std::to_string(info_.context_tokens));
  }
  const int64_t kv_needed =
      std::min<int64_t>(int64_t{prompt_tokens} + r.max_tokens, info_.context_tokens);
  if (kv_needed > options_.engine.kv_tokens) {
    return error(errc::invalid_argument,
                 "the request needs " + std::to_string(kv_needed) +
                     " tokens of KV cache; the "
                     "engine holds " +
                     std::to_string(options_.engine.kv_tokens) +
                     ": lower max_tokens or start the server with more KV tokens");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return error(errc::unavailable, "the server is shutting down");
  const int queued = static_cast<int>(submitted_.size()) + engine_waiting_.load();
  if (queued >= options_.max_queued) {
    return error(errc::resource_exhausted, "the admission queue is full (" +
                                               std::to_string(options_.max_queued) +
                                               " requests waiting); retry later");
  }
  if (!known_ids_.insert(r.id).second) {
    return error(errc::invalid_argument, "request id " + std::to_string(r.id) + " is in use");
  }
  // Before the engine thread can see it: on_accepted comes before any token.
  sink->on_accepted();
  submitted_.push_back({std::move(request), std::move(sink)});
  ++in_flight_;
  wake_.notify_one();
  return ok_status();
}

void engine_service::cancel(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (known_ids_.count(request_id) == 0) return;
    cancelled_.push_back(request_id);
  }
  wake_.notify_one();
}

void engine_service::run() {
  std::deque<submission> submitted;
  std::vector<int64_t> cancelled;
  std::vector<model::token_event> events;
  while (take_work(submitted, cancelled)) {
    admit(submitted);
    apply_cancels(cancelled);
    events.clear();
    if (engine_.step(events)) ++steps_;
    dispatch(events);
    publish_counts();
  }
}

bool engine_service::take_work(std::deque<submission>& submitted, std::vector<int64_t>& cancelled) {
  const bool busy = !by_engine_id_.empty();
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return stopping_ || busy || !submitted_.empty() || !cancelled_.empty(); });
  if (stopping_) return false;
  submitted.swap(submitted_);
  cancelled.swap(cancelled_);
  return true;
}

void engine_service::admit(std::deque<submission>& submitted) {
  for (auto& s : submitted) {
    model::request_options o;
    o.max_tokens = s.request.max_tokens;
    o.sampling = s.request.sampling;
    o.stop_ids = s.request.stop_ids;
    o.top_logprobs = s.request.top_logprobs;
    o.prompt_logprobs = s.request.prompt_logprobs;
    const int prompt_tokens = static_cast<int>(s.request.prompt.size());
    auto id = engine_.submit(std::move(s.request.prompt), o);
    if (!id) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        known_ids_.erase(s.request.id);
      }
      --in_flight_;
      s.sink->on_error(id.err());
      continue;
    }
    by_engine_id_[id.value()] = {s.request.id, prompt_tokens, 0, o.top_logprobs, std::move(s.sink)};
    engine_id_of_[s.request.id] = id.value();
  }
  submitted.clear();
  publish_counts();
}

void engine_service::apply_cancels(const std::vector<int64_t>& cancelled) {
  for (int64_t request_id : cancelled) {
    auto it = engine_id_of_.find(request_id);
    if (it == engine_id_of_.end()) continue;  // Finished before the cancel arrived.
    const int64_t engine_id = it->second;
    // A finished sequence was already reported and released, so the engine knows it as live.
    (void)engine_.cancel(engine_id);
    ++cancels_applied_;
    const error cancelled_error(errc::cancelled,
                                "request " + std::to_string(request_id) + " was cancelled");
    finish(engine_id, &cancelled_error, finish_reason::stop_token);
  }
}

void engine_service::dispatch(const std::vector<model::token_event>& events) {
  std::vector<int32_t> one(1);
  for (const model::token_event& e : events) {
    auto it = by_engine_id_.find(e.request);
    if (it == by_engine_id_.end()) continue;
    ++it->second.generated;
    one[0] = e.token;
    if (!e.prompt_logprobs.empty()) it->second.sink->on_prompt_logprobs(e.prompt_logprobs);
    if (it->second.top_logprobs >= 0) it->second.sink->on_logprobs({e.logprobs});
    it->second.sink->on_tokens(one);
    if (e.finished != model::finish_reason::none) {
      (void)engine_.release(e.request);
      finish(e.request, nullptr, from_engine(e.finished));
    }
  }
}

// Sends the terminal callback (an error when `err` is set) and forgets the request.
void engine_service::finish(int64_t engine_id, const error* err, finish_reason reason) {
  auto it = by_engine_id_.find(engine_id);
  if (it == by_engine_id_.end()) return;
  live_request live = std::move(it->second);
  by_engine_id_.erase(it);
  engine_id_of_.erase(live.request_id);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    known_ids_.erase(live.request_id);
  }
  --in_flight_;
  if (err) {
    live.sink->on_error(*err);
  } else {
    live.sink->on_finished(reason, {live.prompt_tokens, live.generated, 0});
  }
}

void engine_service::fail_all(const error& err) {
  std::deque<submission> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued.swap(submitted_);
    cancelled_.clear();
    for (const auto& s : queued)
      known_ids_.erase(s.request.id);
  }
  for (auto& s : queued) {
    --in_flight_;
    s.sink->on_error(err);
  }
  std::vector<int64_t> live;
  for (const auto& [engine_id, request] : by_engine_id_)
    live.push_back(engine_id);
  for (int64_t engine_id : live) {
    (void)engine_.cancel(engine_id);
    finish(engine_id, &err, finish_reason::stop_token);
  }
  publish_counts();
}

void engine_service::publish_counts() {
  engine_waiting_ = engine_.waiting();
  engine_running_ = engine_.running();
  std::lock_guard<std::mutex> lock(mutex_);
  speculation_ = engine_.speculation();
}

std::string engine_service::actors_json() const {
  nlohmann::json engine_actor = {
      {"name", "engine"},
      {"role", "engine"},
      {"node", "local"},
      {"generation", 1},
      {"state", stopping_flag_ ? "stopped"
                : started_     ? "running"
                               : "starting"},
      {"running", engine_running_.load()},
      {"waiting", engine_waiting_.load()},
      {"steps", steps_.load()},
  };
  nlohmann::json snapshot = {
      {"topology", "single-process engine"},
      {"version", 1},
      {"actors", nlohmann::json::array({engine_actor})},
  };
  return snapshot.dump();
}

std::string engine_service::status_json() const {
  int queued = 0;
  model::speculation_stats speculation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued = static_cast<int>(submitted_.size());
    speculation = speculation_;
  }
  const model::speculation_options& spec = options_.engine.speculation;
  nlohmann::json engine = {
      {"name", "engine"},
      {"role", "engine"},
      {"queue_depth", engine_waiting_.load() + queued},
      {"in_flight", engine_running_.load()},
      {"steps", steps_.load()},
      {"detail",
       {{"speculation",
         model::speculation_json(
             speculation, spec.enabled() ? spec.max_draft : 0, spec.draft,
             options_.engine.draft_weights
                 ? model::draft_model::weight_format_of(*options_.engine.draft_weights)
                 : "",
             options_.engine.draft_weights
                 ? model::draft_model::attention_window_for(spec, *options_.engine.draft_weights)
                 : 0)}}}};
  return nlohmann::json::array({engine}).dump();
}

void engine_service::collect_metrics(metrics::registry& into) const {
  int queued = 0;
  model::speculation_stats speculation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued = static_cast<int>(submitted_.size());
    speculation = speculation_;
  }
  into.add_gauge("brigade_num_requests_running", "Requests in the engine's running batch.")
      .get()
      .set(engine_running_.load());
  into.add_gauge("brigade_num_requests_waiting", "Requests admitted and waiting to run.")
      .get()
      .set(engine_waiting_.load() + queued);
  auto& steps = into.add_counter("brigade_engine_steps_total", "Engine steps run.").get();
  steps.inc(static_cast<double>(steps_.load()) - steps.value());
  auto& cancels =
      into.add_counter(
              "brigade_requests_cancelled_total",
              "Requests stopped while in flight: the client left or a stop string matched.")
          .get();
  cancels.inc(static_cast<double>(cancels_applied_.load()) - cancels.value());
  collect_speculation_metrics(speculation, into);
}

}  // namespace brigade::serve

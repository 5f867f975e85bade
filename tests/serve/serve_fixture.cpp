#include "serve_fixture.hpp"

#include <unistd.h>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "model/model_writer.hpp"

namespace brigade::serve::testing {

const test_model& shared_model() {
  static const test_model m = [] {
    test_model t;
    t.dir =
        std::string(BRIGADE_BINARY_DIR) + "/tests/serve/tiny-model-" + std::to_string(::getpid());
    model::model_spec spec;
    spec.layers = 2;
    spec.hidden = 64;
    spec.heads = 2;
    spec.kv_heads = 1;
    spec.head_dim = 32;
    spec.experts = 4;
    spec.top_k = 2;
    spec.moe_inter = 32;
    spec.vocab = 512;
    spec.max_positions = 256;
    spec.seed = 11;
    const status w = model::write_random_model(spec, t.dir);
    if (!w) throw std::runtime_error(w.err().describe());
    auto tok = model::tokenizer::load(t.dir);
    if (!tok) throw std::runtime_error(tok.err().describe());
    t.tok = std::make_unique<model::tokenizer>(std::move(tok.value()));
    t.dev = gpu::make_cpu_backend();
    auto loaded = model::loaded_model::load(t.dir, *t.dev, true);
    if (!loaded) throw std::runtime_error(loaded.err().describe());
    t.loaded = std::move(loaded.value());
    std::filesystem::remove_all(t.dir);  // Loaded: the files are no longer needed.
    return t;
  }();
  return m;
}

class recording_service::sink_wrapper final : public generation_sink {
 public:
  sink_wrapper(recording_service& owner, int64_t id, std::shared_ptr<generation_sink> inner)
      : owner_(owner), id_(id), inner_(std::move(inner)) {}
  void on_accepted() override { inner_->on_accepted(); }
  void on_logprobs(const std::vector<model::position_logprobs>& logprobs) override {
    inner_->on_logprobs(logprobs);
  }
  void on_cached(int cached_tokens) override { inner_->on_cached(cached_tokens); }
  void on_tokens(const std::vector<int32_t>& tokens) override {
    outcome_.tokens += static_cast<int>(tokens.size());
    owner_.record(id_, outcome_, false);
    inner_->on_tokens(tokens);
    const int gate = owner_.gate_after_tokens_.load();
    if (gate > 0 && outcome_.tokens == gate) owner_.gate_wait();
  }
  void on_finished(finish_reason reason, const generation_usage& usage) override {
    outcome_.finished = true;
    inner_->on_finished(reason, usage);
    owner_.record(id_, outcome_, true);
  }
  void on_error(const error& err) override {
    outcome_.errored = true;
    outcome_.error_code = err.code;
    inner_->on_error(err);
    owner_.record(id_, outcome_, true);
  }

 private:
  recording_service& owner_;
  int64_t id_;
  std::shared_ptr<generation_sink> inner_;
  outcome outcome_;
};

status recording_service::submit(generation_request request,
                                 std::shared_ptr<generation_sink> sink) {
  const int64_t id = request.id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++live_;
    outcomes_[id] = {};
    salts_.push_back(request.cache_salt);
  }
  status s = inner_.submit(std::move(request), std::make_shared<sink_wrapper>(*this, id, sink));
  if (!s) {
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
    outcomes_.erase(id);
    changed_.notify_all();
  }
  return s;
}

// Forwarded before it is recorded: a test that waits for the cancel and then lets the engine go
// on (open_gate) must find it queued in the service already. Recorded first, a cancel whose thread
// was preempted before forwarding it let the engine finish the request instead.
std::string recording_service::actors_json() const {
  if (fail_actors_json) throw std::runtime_error("injected fault in actors_json");
  return inner_.actors_json();
}

void recording_service::cancel(int64_t request_id) {
  inner_.cancel(request_id);
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_.insert(request_id);
  changed_.notify_all();
}

void recording_service::record(int64_t id, const outcome& o, bool ended) {
  std::lock_guard<std::mutex> lock(mutex_);
  outcomes_[id] = o;
  if (ended) --live_;
  changed_.notify_all();
}

void recording_service::gate_wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::seconds(60), [&] { return gate_open_; });
}

void recording_service::open_gate() {
  std::lock_guard<std::mutex> lock(mutex_);
  gate_open_ = true;
  changed_.notify_all();
}

int64_t recording_service::wait_for_cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::seconds(60), [&] { return !cancelled_.empty(); });
  return cancelled_.empty() ? -1 : *cancelled_.begin();
}

bool recording_service::wait_until_all_ended() {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return live_ == 0; });
}

std::set<int64_t> recording_service::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

std::vector<std::string> recording_service::submitted_salts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return salts_;
}

recording_service::outcome recording_service::outcome_of(int64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = outcomes_.find(id);
  return it == outcomes_.end() ? outcome{} : it->second;
}

test_server::test_server(const server_options& options) {
  const test_model& m = shared_model();
  engine_service_options so;
  so.model_name = model_name;
  so.max_queued = options.max_queued;
  so.engine.kv_tokens = 4096;
  so.engine.max_running = 8;
  so.engine.speculation.max_draft = options.speculate;
  engine = std::make_unique<engine_service>(*m.loaded, *m.dev, so);
  if (options.start_service) engine->start();
  recorder = std::make_unique<recording_service>(*engine);
  api_handler_options ho;
  ho.api_keys = options.api_keys;
  ho.admin_keys = options.admin_keys;
  ho.listen_host = options.host;
  ho.admin_without_key = options.admin_without_key;
  if (m.tok->eos_id()) ho.eos_ids = {*m.tok->eos_id()};
  handler = std::make_unique<api_handler>(*recorder, *m.tok, ho);
  http_server_options hs;
  hs.host = options.host;
  hs.port = 0;
  hs.max_connections = options.max_connections;
  hs.max_body_bytes = options.max_body_bytes;
  http = std::make_unique<http_server>(*handler, hs);
  const status started = http->start();
  if (!started) throw std::runtime_error(started.err().describe());
}

test_server::~test_server() {
  recorder->open_gate();
  http->stop();
  engine->stop();
}

std::unique_ptr<http_client> test_server::client() const {
  return std::make_unique<http_client>("127.0.0.1", port());
}

nlohmann::json parse_json(const std::string& body) {
  INFO("body: " << body);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

}  // namespace brigade::serve::testing

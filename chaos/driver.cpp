#include "chaos/driver.hpp"

#include <condition_variable>
#include <nlohmann/json.hpp>

#include "chaos/deadline_guard.hpp"
#include "serve/http_client.hpp"

namespace brigade::chaos {
namespace {

// Reads one answer of the OpenAI completions API into `o`.
void read_json_answer(const std::string& body, outcome& o) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    o.how = outcome::end::error;
    o.detail = "an answer that is not JSON: " + body.substr(0, 200);
    return;
  }
  if (j.contains("error")) {
    o.how = outcome::end::error;
    o.detail = j["error"].dump();
    return;
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].size() != 1) {
    o.how = outcome::end::error;
    o.detail = "an answer without one choice: " + body.substr(0, 200);
    return;
  }
  o.text = j["choices"][0].value("text", std::string());
  if (j.contains("usage") && j["usage"].is_object()) {
    o.completion_tokens = j["usage"].value("completion_tokens", -1);
  }
  o.how = j["choices"][0].contains("finish_reason") && !j["choices"][0]["finish_reason"].is_null()
              ? outcome::end::complete
              : outcome::end::error;
  if (o.how == outcome::end::error) o.detail = "an answer without a finish reason";
}

}  // namespace

const char* to_string(outcome::end e) {
  switch (e) {
    case outcome::end::pending:
      return "pending";
    case outcome::end::complete:
      return "complete";
    case outcome::end::error:
      return "error";
    case outcome::end::lost:
      return "lost";
    case outcome::end::duplicated:
      return "duplicated";
  }
  return "?";
}

driver::driver(std::string host, uint16_t port, std::string api_key, std::string model_name,
               clock::time_point start, std::chrono::milliseconds request_timeout)
    : host_(std::move(host)),
      port_(port),
      api_key_(std::move(api_key)),
      model_(std::move(model_name)),
      start_(start),
      timeout_(request_timeout) {}

driver::~driver() {
  join();
}

int64_t driver::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start_).count();
}

void driver::retarget(std::string host, uint16_t port) {
  std::lock_guard<std::mutex> lock(mutex_);
  host_ = std::move(host);
  port_ = port;
}

std::string driver::body(const request_spec& r) const {
  nlohmann::json j{{"model", model_},
                   {"prompt", r.prompt},
                   {"max_tokens", r.max_tokens},
                   {"temperature", r.temperature},
                   {"stream", r.stream},
                   {"ignore_eos", true},
                   {"scenario", r.scenario}};
  if (r.temperature > 0) {
    j["top_p"] = r.top_p;
    j["seed"] = r.seed;
  }
  if (r.stream) j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

outcome driver::send(const request_spec& r, std::chrono::milliseconds timeout) {
  std::string host;
  uint16_t port = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    host = host_;
    port = port_;
  }
  outcome o;
  serve::http_client client(host, port);
  const serve::header_list headers = {{"Authorization", "Bearer " + api_key_}};
  o.sent_ms = now_ms();
  deadline_guard guard(client, timeout);
  if (!r.stream) {
    auto answer = client.request("POST", "/v1/completions", body(r), headers);
    o.done_ms = now_ms();
    if (!answer) {
      o.how = guard.expired() ? outcome::end::lost : outcome::end::error;
      o.detail = answer.err().message;
      return o;
    }
    o.http_status = answer->status;
    read_json_answer(answer->body, o);
    if (o.how == outcome::end::complete) o.first_ms = o.done_ms;
    return o;
  }
  bool finished = false, done_marker = false;
  auto on_event = [&](const std::string& data) {
    if (done_marker) {
      o.how = outcome::end::duplicated;
      o.detail = "data after [DONE]: " + data.substr(0, 120);
      return false;
    }
    if (data == "[DONE]") {
      done_marker = true;
      return true;
    }
    const auto j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return true;
    if (j.contains("error")) {
      o.how = outcome::end::error;
      o.detail = j["error"].dump();
      return false;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      o.completion_tokens = j["usage"].value("completion_tokens", -1);
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return true;
    const auto& c = j["choices"][0];
    const std::string piece = c.value("text", std::string());
    if (!piece.empty()) {
      o.text += piece;
      o.chunk_ms.push_back(now_ms());
      if (o.first_ms < 0) o.first_ms = o.chunk_ms.back();
      ++chunks_;
    }
    if (c.contains("finish_reason") && !c["finish_reason"].is_null()) {
      if (finished) {
        o.how = outcome::end::duplicated;
        o.detail = "two finish reasons";
        return false;
      }
      finished = true;
    }
    return true;
  };
  auto answer = client.stream("/v1/completions", body(r), headers, on_event);
  o.done_ms = now_ms();
  if (o.how != outcome::end::pending) return o;
  if (answer && answer->status != 200) {
    o.http_status = answer->status;
    read_json_answer(answer->body, o);
    if (o.how == outcome::end::complete) o.how = outcome::end::error;
    return o;
  }
  if (answer) o.http_status = answer->status;
  if (finished && done_marker) {
    o.how = outcome::end::complete;
  } else if (guard.expired()) {
    o.how = outcome::end::lost;
    o.detail = "nothing for " + std::to_string(timeout.count()) + " ms";
  } else {
    o.how = outcome::end::error;
    o.detail = answer ? "the stream ended without its end" : answer.err().message;
  }
  if (o.how == outcome::end::complete && o.completion_tokens > r.max_tokens) {
    o.how = outcome::end::duplicated;
    o.detail = std::to_string(o.completion_tokens) + " tokens for " + std::to_string(r.max_tokens) +
               " asked";
  }
  return o;
}

void driver::client_loop() {
  while (true) {
    const int i = next_++;
    if (i >= total_) return;
    const request_spec& r = requests_[static_cast<size_t>(i)];
    if (r.arrival_ms >= 0) {
      const auto due = start_ + std::chrono::milliseconds(r.arrival_ms);
      std::this_thread::sleep_until(due);
    }
    outcome o = send(r, timeout_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      outcomes_[static_cast<size_t>(i)] = std::move(o);
    }
    ++done_;
  }
}

void driver::start(std::vector<request_spec> requests, int concurrency) {
  requests_ = std::move(requests);
  total_ = static_cast<int>(requests_.size());
  outcomes_.assign(requests_.size(), outcome{});
  for (int t = 0; t < std::max(1, std::min(concurrency, total_)); ++t)
    threads_.emplace_back([this] { client_loop(); });
}

void driver::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

std::vector<outcome> driver::outcomes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outcomes_;
}

}  // namespace brigade::chaos

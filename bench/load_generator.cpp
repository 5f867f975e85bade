#include "bench/load_generator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace brigade::bench {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

request_sample sample_of(clock::time_point sent, clock::time_point first, clock::time_point last,
                         int tokens) {
  request_sample s;
  s.ttft_s = seconds(first - sent);
  s.tpot_s = tokens > 1 ? seconds(last - first) / (tokens - 1) : 0.0;
  s.tokens = tokens;
  return s;
}

// Runs `users` threads, each calling one_request() until `requests` were claimed.
template <class OneRequest>
load_result closed_loop(int users, int requests, OneRequest one_request) {
  load_result out;
  std::mutex mutex;
  std::atomic<int> next{0};
  const clock::time_point start = clock::now();
  std::vector<std::thread> threads;
  for (int u = 0; u < users; ++u) {
    threads.emplace_back([&, u] {
      auto state = one_request.make_user(u);
      for (int i = next++; i < requests; i = next++) {
        std::string err;
        request_sample s;
        const bool ok = one_request(state, i, s, err);
        std::lock_guard<std::mutex> lock(mutex);
        if (ok) {
          out.samples.push_back(s);
        } else if (out.errors++ == 0) {
          out.first_error = err;
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  out.wall_s = seconds(clock::now() - start);
  return out;
}

struct http_request_fn {
  const http_load_options& o;

  std::unique_ptr<serve::http_client> make_user(int) const {
    return std::make_unique<serve::http_client>(o.host, o.port);
  }

  bool operator()(std::unique_ptr<serve::http_client>& client, int i, request_sample& s,
                  std::string& err) const {
    const clock::time_point sent = clock::now();
    clock::time_point first{}, last{};
    int tokens = -1;
    bool have_first = false;
    auto on_event = [&](const std::string& data) {
      if (data == "[DONE]") return true;
      // Token chunks have "finish_reason":null; the usage chunk ends the stream. Only the
      // usage chunk is parsed, to keep the client's share of the CPUs small.
      if (data.find("\"finish_reason\":null") != std::string::npos) {
        if (!have_first) first = clock::now();
        have_first = true;
      } else if (data.find("\"usage\":{") != std::string::npos) {
        tokens = nlohmann::json::parse(data)["usage"]["completion_tokens"].get<int>();
      } else if (data.find("\"finish_reason\":\"") != std::string::npos) {
        last = clock::now();
      }
      return true;
    };
    auto r = client->stream("/v1/completions", o.make_body(i), {}, on_event);
    if (!r) {
      err = r.err().message;
      return false;
    }
    if (r->status != 200 || tokens < 0 || !have_first) {
      err = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
      return false;
    }
    s = sample_of(sent, first, last, tokens);
    return true;
  }
};

struct direct_request_fn {
  serve::inference_service& service;
  const std::function<serve::generation_request(int)>& make_request;

  int make_user(int) const { return 0; }

  bool operator()(int, int i, request_sample& s, std::string& err) const {
    auto sink = std::make_shared<answer_sink>();
    const clock::time_point sent = clock::now();
    status submitted = service.submit(make_request(i), sink);
    if (!submitted) {
      err = submitted.err().message;
      return false;
    }
    err = sink->wait();
    if (!err.empty()) return false;
    s = sample_of(sent, sink->first_token(), sink->last_token(),
                  static_cast<int>(sink->tokens().size()));
    return true;
  }
};

}  // namespace

void answer_sink::on_tokens(const std::vector<int32_t>& tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  const clock::time_point now = clock::now();
  if (tokens_.empty()) first_ = now;
  last_ = now;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

std::string answer_sink::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  ended_cv_.wait(lock, [&] { return ended_; });
  return error_;
}

void answer_sink::end(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  ended_at_ = clock::now();
  error_ = message;
  ended_ = true;
  ended_cv_.notify_all();
}

double load_result::requests_per_s() const {
  return wall_s > 0 ? static_cast<double>(samples.size()) / wall_s : 0.0;
}

double load_result::output_tokens_per_s() const {
  double tokens = 0;
  for (const auto& s : samples)
    tokens += s.tokens;
  return wall_s > 0 ? tokens / wall_s : 0.0;
}

load_result run_http_load(const http_load_options& options) {
  return closed_loop(options.concurrency, options.requests, http_request_fn{options});
}

load_result run_direct_load(serve::inference_service& service, int concurrency, int requests,
                            const std::function<serve::generation_request(int)>& make_request) {
  return closed_loop(concurrency, requests, direct_request_fn{service, make_request});
}

}  // namespace brigade::bench

// Closed-loop load for `brigade bench serve`: `concurrency` clients each send a request, wait
// for its whole answer, and send the next, until `requests` answers arrived. Times are taken
// where a client sees them: time to first token and time per output token of every request.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "serve/http_client.hpp"
#include "serve/inference_service.hpp"

namespace brigade::bench {

struct request_sample {
  double ttft_s = 0;  ///< From sending the request to its first token.
  double tpot_s = 0;  ///< Mean time per output token after the first.
  int tokens = 0;     ///< Output tokens (from usage).
};

/// One request's answer straight from a service, and when its parts arrived.
class answer_sink final : public serve::generation_sink {
 public:
  using clock = std::chrono::steady_clock;

  void on_tokens(const std::vector<int32_t>& tokens) override;
  void on_finished(serve::finish_reason, const serve::generation_usage&) override { end(""); }
  void on_error(const error& e) override { end(e.message); }

  /// Waits for the end; returns the error message, or "".
  std::string wait();
  /// After wait(): the tokens, and when the first and the last arrived and the answer ended.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  clock::time_point first_token() const { return first_; }
  clock::time_point last_token() const { return last_; }
  clock::time_point ended() const { return ended_at_; }

 private:
  void end(const std::string& message);
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  bool ended_ = false;
  std::string error_;
  std::vector<int32_t> tokens_;
  clock::time_point first_{}, last_{}, ended_at_{};
};

struct load_result {
  double wall_s = 0;
  std::vector<request_sample> samples;
  int errors = 0;
  std::string first_error;

  double requests_per_s() const;
  double output_tokens_per_s() const;
};

struct http_load_options {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int concurrency = 1;
  int requests = 16;
  /// Request i's streamed /v1/completions body, with stream_options.include_usage set.
  std::function<std::string(int)> make_body;
};

/// Drives an HTTP server with streaming completions over `concurrency` keep-alive connections.
load_result run_http_load(const http_load_options& options);

/// The same closed loop straight into a service, without HTTP: the baseline that shows what the
/// HTTP layer costs. `make_request(i)` builds request i (ids must be unique).
load_result run_direct_load(serve::inference_service& service, int concurrency, int requests,
                            const std::function<serve::generation_request(int)>& make_request);

}  // namespace brigade::bench

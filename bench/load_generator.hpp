// Closed-loop load for `brigade bench serve`: `concurrency` clients each send a request, wait
// for its whole answer, and send the next, until `requests` answers arrived. Times are taken
// where a client sees them: time to first token and time per output token of every request.
#pragma once

#include <cstdint>
#include <functional>
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

// Drives a chaos run's requests through the coordinator's HTTP API as real clients do (streamed
// or not, closed or open loop) and records how each one ended and when its tokens came.
//
// How a request can end:
//   complete    a finish reason, then [DONE] (streams) or the whole JSON answer
//   error       an HTTP error status, an error event, or the connection closed before the end
//               (a client sees each and can act on it)
//   lost        nothing more within the request timeout: no answer, no error
//   duplicated  the end came twice, data followed it, or more tokens than asked for
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chaos/workload.hpp"

namespace brigade::chaos {

struct outcome {
  enum class end { pending, complete, error, lost, duplicated };
  end how = end::pending;
  std::string text;
  std::string detail;  ///< The error, or what was duplicated.
  int http_status = 0;
  int completion_tokens = -1;  ///< From usage, when the answer had it.
  int64_t sent_ms = -1;        ///< Since the run's start.
  int64_t first_ms = -1;       ///< First token.
  int64_t done_ms = -1;
  std::vector<int64_t> chunk_ms;  ///< When each streamed chunk came.
};

const char* to_string(outcome::end e);

class driver {
 public:
  using clock = std::chrono::steady_clock;
  driver(std::string host, uint16_t port, std::string api_key, std::string model_name,
         clock::time_point start, std::chrono::milliseconds request_timeout);
  ~driver();

  /// Sends `requests` from `concurrency` client threads (open loop where they have arrival
  /// times); returns at once.
  void start(std::vector<request_spec> requests, int concurrency);
  /// Waits until every request ended.
  void join();
  bool finished() const { return done_ == total_; }
  int done() const { return done_; }
  int total() const { return total_; }
  /// Streamed chunks so far, in all requests (a chunk is usually one token).
  int64_t chunks() const { return chunks_; }
  std::vector<outcome> outcomes() const;

  /// One request, sent and read on the caller's thread, bounded by `timeout`.
  outcome send(const request_spec& r, std::chrono::milliseconds timeout);
  /// Points later requests at another address (a coordinator restarted elsewhere).
  void retarget(std::string host, uint16_t port);

 private:
  void client_loop();
  int64_t now_ms() const;
  std::string body(const request_spec& r) const;

  mutable std::mutex mutex_;
  std::string host_;
  uint16_t port_;
  std::string api_key_;
  std::string model_;
  clock::time_point start_;
  std::chrono::milliseconds timeout_;
  std::vector<request_spec> requests_;
  std::vector<outcome> outcomes_;
  std::atomic<int> next_{0};
  std::atomic<int> done_{0};
  int total_ = 0;
  std::atomic<int64_t> chunks_{0};
  std::vector<std::thread> threads_;
};

}  // namespace brigade::chaos

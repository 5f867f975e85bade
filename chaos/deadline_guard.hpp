// Bounds how long a blocking HTTP client call may wait: a peer that stopped (SIGSTOP) or whose
// connection is cut would otherwise hold the calling thread for good.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "serve/http_client.hpp"

namespace brigade::chaos {

/// Interrupts `client` when the scope lasts longer than `timeout`.
class deadline_guard {
 public:
  deadline_guard(serve::http_client& client, std::chrono::milliseconds timeout)
      : thread_([this, &client, timeout] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, timeout, [this] { return done_; })) {
            expired_ = true;
            client.interrupt();
          }
        }) {}
  ~deadline_guard() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  bool expired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return expired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  bool expired_ = false;
  std::thread thread_;
};

}  // namespace brigade::chaos

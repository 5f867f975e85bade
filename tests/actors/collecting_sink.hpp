// A generation_sink that records everything and lets a test wait for the end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "serve/inference_service.hpp"

namespace brigade::testing {

class collecting_sink final : public serve::generation_sink {
 public:
  void on_accepted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    accepted_ = true;
  }
  void on_logprobs(const std::vector<model::position_logprobs>& logprobs) override {
    std::lock_guard<std::mutex> lock(mutex_);
    logprobs_.insert(logprobs_.end(), logprobs.begin(), logprobs.end());
  }
  void on_tokens(const std::vector<int32_t>& tokens) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    ++calls_;
    cv_.notify_all();
  }
  void on_finished(serve::finish_reason reason, const serve::generation_usage& usage) override {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    reason_ = reason;
    usage_ = usage;
    ++terminal_calls_;
    cv_.notify_all();
  }
  void on_error(const error& err) override {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    failed_ = true;
    error_ = err;
    ++terminal_calls_;
    cv_.notify_all();
  }

  /// Waits for the end; false on timeout.
  bool wait(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }
  /// Waits until at least n tokens arrived.
  bool wait_tokens(size_t n, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return tokens_.size() >= n || done_; });
  }
  std::vector<int32_t> tokens() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return tokens_;
  }
  bool failed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_;
  }
  error err() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  serve::generation_usage usage() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return usage_;
  }
  int terminal_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return terminal_calls_;
  }
  /// The service admitted the request (an error before this is a refusal).
  bool accepted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return accepted_;
  }
  std::vector<model::position_logprobs> logprobs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return logprobs_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::vector<model::position_logprobs> logprobs_;
  bool accepted_ = false;
  bool done_ = false;
  bool failed_ = false;
  error error_;
  serve::finish_reason reason_{};
  serve::generation_usage usage_;
  int calls_ = 0;
  int terminal_calls_ = 0;
};

}  // namespace brigade::testing

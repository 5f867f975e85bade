// A progress bar on stderr for long work (model loading). Silent when stderr is not a terminal,
// where it prints one line at the end instead.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace brigade {

class progress_bar {
 public:
  explicit progress_bar(std::string label);
  /// Redraws at most ~10 times a second.
  void update(size_t done, size_t total);
  /// Completes the bar and prints the elapsed time.
  void finish(const std::string& summary = "");

 private:
  std::string label_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace brigade

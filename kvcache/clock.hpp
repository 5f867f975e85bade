// The time source of cache retention, injectable so that tests can warp days in microseconds.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace brigade::kvcache {

/// Nanoseconds since the Unix epoch: a plain number so that expiry times order and store cheaply.
using time_ns = std::int64_t;

/// Where the cache reads the current time. Implementations are safe to call from any thread.
class clock {
 public:
  virtual ~clock() = default;
  virtual time_ns now() const = 0;
};

/// Wall-clock time: retention is measured in days, across process restarts.
class system_clock final : public clock {
 public:
  time_ns now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

/// A clock that moves only when told: tests and trace replay set it to the moment they simulate.
class manual_clock final : public clock {
 public:
  explicit manual_clock(time_ns start = 0) : now_(start) {}

  time_ns now() const override { return now_.load(std::memory_order_acquire); }
  void set(time_ns t) { now_.store(t, std::memory_order_release); }
  void advance(std::chrono::nanoseconds by) { now_.fetch_add(by.count()); }

 private:
  std::atomic<time_ns> now_;
};

/// Converts a duration to the clock's unit.
template <class Rep, class Period>
constexpr time_ns to_ns(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace brigade::kvcache

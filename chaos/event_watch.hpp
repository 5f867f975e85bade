// Follows the coordinator's event stream (GET /v1/events, server-sent events) in a thread of its
// own: node and role faults and recoveries, re-plans and migrations, each stamped with the time
// the coordinator recorded it. Reconnects when the coordinator pauses, dies or moves.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace brigade::serve {
class http_client;
}

namespace brigade::chaos {

struct seen_event {
  int64_t at_ms = 0;  ///< When the coordinator recorded it, since the run's start (steady clock).
  std::string kind;
  std::string node;
  std::string actor;
  std::string detail;
};

/// When an event happened, in ms since the run's start on the steady clock: its age when it
/// arrived (`now_unix_ms` less its `unix_ms` stamp, both on the system clock, never below 0) before
/// `now_since_start_ms`, the arrival on the steady clock. The coordinator stamps events on the
/// system clock, and a run's faults are timed on the steady clock; comparing a stamp with the
/// system clock at the run's start instead counted any step of the system clock in between (a
/// virtual machine's clock stepped 8 s forward in one run, and a kill noticed in 185 ms read as
/// 8,121). An event's age spans the push interval, not the run.
int64_t event_at_ms(int64_t unix_ms, int64_t now_unix_ms, int64_t now_since_start_ms);

class event_watch {
 public:
  /// `start` is the run's start on the steady clock; `on_event` sees each new event.
  event_watch(std::string host, uint16_t port, std::string api_key,
              std::chrono::steady_clock::time_point start,
              std::function<void(const seen_event&)> on_event);
  ~event_watch();

  /// Follows a coordinator at another port from now on (a restarted one: its events count
  /// from one again).
  void retarget(uint16_t port);
  std::vector<seen_event> events() const;

 private:
  void loop();

  std::string host_;
  std::atomic<uint16_t> port_;
  std::string api_key_;
  std::chrono::steady_clock::time_point start_;
  std::function<void(const seen_event&)> on_event_;
  mutable std::mutex mutex_;
  std::vector<seen_event> events_;
  serve::http_client* client_ = nullptr;  // the stream being read, to interrupt it
  uint64_t since_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Whether the coordinator had `node` out of contact at `at_ms`: a node_lost or node_leaving (a
/// node stopping on its own) for it at or before then, and no node_rejoined after that and
/// before `at_ms`. `seen` is in the order the
/// coordinator recorded it. A fault on such a node changes nothing the cluster sees (its roles
/// have already moved), so there is nothing new for it to notice.
bool out_of_contact_at(const std::vector<seen_event>& seen, const std::string& node, int64_t at_ms);

}  // namespace brigade::chaos

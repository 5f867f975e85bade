// Carries out a scenario's faults on a running cluster: signals to processes, the control-plane
// proxies, fault points on the nodes (POST /v1/admin/faults), the SSD tier's files, and the
// restarts. Timed faults are healed when their time is up, and every fault still on at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "chaos/cluster.hpp"
#include "chaos/scenario.hpp"

namespace brigade::chaos {

class fault_injector {
 public:
  /// `now_ms` reads the run's clock; `on_event` gets a line per action.
  fault_injector(cluster& c, uint64_t seed, std::function<int64_t()> now_ms,
                 std::function<void(const std::string&)> on_event);

  /// Injects `f`, the scenario's fault number `index`; returns what it did ("kill node n1 (pid
  /// 123)"), or an error.
  result<std::string> inject(size_t index, const fault_spec& f);
  /// Heals the timed faults whose time is up (call often, from any one thread: a fault that
  /// blocks, on a coordinator that is stopped, must not hold a heal back); returns how many
  /// were healed.
  int heal_due();
  /// Heals every fault still on (the run ends).
  void heal_all();
  /// When the last timed fault still on ends (ms on the run's clock), or -1 when none is.
  int64_t active_until() const;
  /// When the most recent heal of fault number `index` happened, or -1.
  int64_t healed_at(size_t index) const;
  /// The actor a role fault chose (for detection), or "".
  const std::string& chosen_actor() const { return chosen_actor_; }
  /// Set after a coordinator restart, so that the caller can follow it.
  bool coordinator_moved() {
    const bool moved = coordinator_moved_;
    coordinator_moved_ = false;
    return moved;
  }
  /// Starts a random migration and waits until it is in flight (for faults at "migration").
  status start_migration(uint64_t seed);
  /// term faults: how long fault number `index`'s process took to exit after SIGTERM (-1: it
  /// has not). Waits up to `wait_ms` for the answer.
  int64_t exit_ms(size_t index, int64_t wait_ms);
  ~fault_injector();

 private:
  struct timed {
    size_t index = 0;
    int64_t until_ms = 0;  ///< 0: at the end.
    std::function<void()> heal;
    bool done = false;
  };
  result<std::string> kill(const fault_spec& f);
  result<std::string> stop(const fault_spec& f);
  result<std::string> term(const fault_spec& f);
  result<std::string> partition(const fault_spec& f);
  result<std::string> network(const fault_spec& f);
  result<std::string> disk(const fault_spec& f);
  result<std::string> restart(const fault_spec& f);
  status admin_fault(const std::string& node, const std::string& kind, const std::string& peer,
                     double rate, int64_t ms, int64_t for_ms);
  void add_timed(int64_t for_ms, std::function<void()> heal);

  cluster& cluster_;
  std::mt19937_64 random_;
  std::function<int64_t()> now_ms_;
  std::function<void(const std::string&)> on_event_;
  mutable std::mutex timed_mutex_;  // heals run on their own thread, beside new faults
  std::vector<timed> timed_;
  std::vector<int64_t> healed_at_;
  size_t current_ = 0;
  std::string chosen_actor_;
  bool coordinator_moved_ = false;
  std::mutex exit_mutex_;
  std::map<size_t, int64_t> exits_;  // term faults: ms from SIGTERM to the exit, -1 pending
  std::vector<std::thread> waiters_;
};

}  // namespace brigade::chaos

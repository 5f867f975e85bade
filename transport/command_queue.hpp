// Work handed to the progress thread by other threads: sends and tasks, in the order they were
// queued, plus the eventfd that wakes the thread when it sleeps. The thread announces that it
// is about to sleep, so producers write the eventfd only then: a busy progress thread costs
// producers one uncontended lock and no system call.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/result.hpp"
#include "transport/send_operation.hpp"

namespace brigade::transport {

class command_queue {
 public:
  /// A send or a task; exactly one is set.
  struct command {
    std::unique_ptr<send_operation> send;
    std::function<void()> task;
  };

  /// `max_tasks` bounds queued tasks; sends are bounded by the transport's admission count.
  explicit command_queue(std::size_t max_tasks);
  ~command_queue();
  command_queue(const command_queue&) = delete;
  command_queue& operator=(const command_queue&) = delete;

  /// Fails (and returns the operation's handler untouched) once the queue is closed.
  status push_send(std::unique_ptr<send_operation>& op);
  status push_task(std::function<void()> task);
  /// Refuses further pushes; returns what is still queued.
  std::vector<command> close();

  /// Progress thread: moves everything queued into `out` (cleared first); false if none.
  bool take(std::vector<command>& out);

  /// Progress thread: call before sleeping. Returns false if work arrived meanwhile (do not
  /// sleep); after true, producers will write wake_fd().
  bool prepare_to_sleep();
  /// Progress thread: call after waking, whether or not the eventfd fired.
  void woke();
  /// Wakes the progress thread whether or not it sleeps (used to stop it).
  void wake();
  /// Readable while the sleeping progress thread should wake.
  int wake_fd() const { return wake_fd_; }
  bool valid() const { return wake_fd_ >= 0; }

 private:
  void wake_if_sleeping();

  std::size_t max_tasks_;
  std::mutex mutex_;
  std::vector<command> queued_;
  std::size_t queued_tasks_ = 0;
  /// Mirrors !queued_.empty() so that an idle progress thread polls without taking the lock.
  std::atomic<bool> has_work_{false};
  bool closed_ = false;
  std::atomic<bool> sleeping_{false};
  int wake_fd_ = -1;
};

}  // namespace brigade::transport

// The progress thread of a node's transport and everything it owns: the UCX worker, the
// sending and receiving halves, the registration cache and the queue other threads feed.
//
// Lifecycle:
//
//   start() ──> running: poll commands, delays and the worker; after busy_poll_us without work,
//      │        sleep on epoll(worker event fd, wake eventfd, next delay)
//      v
//   ~progress_engine() ──> draining: queued work runs, endpoints flush (close_timeout_ms)
//      │                   then whatever is left fails with `cancelled`
//      v
//   stopped: worker destroyed, then operations freed, then registrations, then the context
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "common/result.hpp"
#include "transport/command_queue.hpp"
#include "transport/inbound.hpp"
#include "transport/outbound.hpp"
#include "transport/registration_cache.hpp"
#include "transport/transport_config.hpp"
#include "transport/transport_stats.hpp"
#include "transport/ucx_worker.hpp"

namespace brigade::transport {

/// Called on the progress thread when UCX reports a peer failed (its in-flight work has already
/// failed); the control plane's own liveness verdicts arrive through disconnect() instead.
using peer_failure_handler = std::function<void(peer_id peer, const error& why)>;

class progress_engine {
 public:
  using clock = std::chrono::steady_clock;

  static result<std::unique_ptr<progress_engine>> start(const transport_config& config);
  ~progress_engine();
  progress_engine(const progress_engine&) = delete;
  progress_engine& operator=(const progress_engine&) = delete;

  const transport_config& config() const { return config_; }
  /// The envelope (worker_address) peers pass to connect().
  const std::vector<std::byte>& local_address() const { return local_address_; }
  bool on_progress_thread() const { return std::this_thread::get_id() == thread_id_; }

  /// Runs `task` on the progress thread: at once when called there, otherwise queued.
  status post(std::function<void()> task);
  /// Runs `task` on the progress thread and waits for its result.
  status call(std::function<status()> task);
  /// Admits one send against max_outstanding_sends and hands it to the progress thread.
  status submit(std::unique_ptr<send_operation> op);

  /// Progress thread only: the halves, and dropping a peer from both.
  outbound& out() { return *out_; }
  inbound& in() { return *in_; }
  void drop_peer(peer_id peer, const error& why, bool report_failure);
  void set_peer_failure_handler(peer_failure_handler handler) {
    on_peer_failure_ = std::move(handler);
  }

  transport_stats stats() const { return stats_.snapshot(); }

 private:
  explicit progress_engine(const transport_config& config);
  status init();
  void run(std::promise<void>* started);
  void pin_thread();
  bool run_commands();
  bool progress();
  void sleep();
  void shutdown();

  transport_config config_;
  std::unique_ptr<ucx_worker> worker_;
  std::unique_ptr<registration_cache> registrations_;
  std::unique_ptr<inbound> in_;
  std::unique_ptr<outbound> out_;
  command_queue queue_;
  std::vector<command_queue::command> commands_;
  std::vector<std::byte> local_address_;
  stats_counters stats_;
  std::atomic<std::size_t> outstanding_{0};
  peer_failure_handler on_peer_failure_;
  int epoll_fd_ = -1;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<bool> stop_requested_{false};
  bool stopped_ = false;
};

}  // namespace brigade::transport

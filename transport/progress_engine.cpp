#include "transport/progress_engine.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "common/log.hpp"
#include "transport/frame_header.hpp"
#include "transport/worker_address.hpp"

namespace brigade::transport {
namespace {

/// Upper bound on back-to-back ucp_worker_progress calls, so a steady stream of incoming data
/// cannot starve queued sends and deliveries.
constexpr int max_progress_rounds = 64;
/// Control tasks (connect, disconnect, post) that may wait for the progress thread at once.
constexpr std::size_t max_queued_tasks = 1024;
/// How often a sleeping thread looks again while endpoint closes are outstanding.
constexpr int closing_poll_ms = 10;
constexpr int stall_watch_poll_ms = 250;

status add_to_epoll(int epoll_fd, int fd) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    return error(errc::io_error,
                 std::string("transport: cannot watch a file descriptor with epoll: ") +
                     std::strerror(errno));
  }
  return ok_status();
}

}  // namespace

progress_engine::progress_engine(const transport_config& config)
    : config_(config), queue_(max_queued_tasks) {}

result<std::unique_ptr<progress_engine>> progress_engine::start(const transport_config& config) {
  if (status s = validate(config); !s) return s.err();
  std::unique_ptr<progress_engine> engine(new progress_engine(config));
  if (status s = engine->init(); !s) return s.err();
  std::promise<void> started;
  std::future<void> ready = started.get_future();
  engine->thread_ = std::thread([e = engine.get(), &started] { e->run(&started); });
  ready.wait();
  return engine;
}

status progress_engine::init() {
  if (!queue_.valid()) {
    return error(errc::io_error, std::string("transport: eventfd failed: ") + std::strerror(errno));
  }
  result<std::unique_ptr<ucx_worker>> worker = ucx_worker::create(config_);
  if (!worker) return worker.err();
  worker_ = std::move(*worker);
  const std::size_t frame_and_header = frame_header::wire_bytes + config_.max_header_bytes;
  if (frame_and_header > worker_->max_am_header_bytes()) {
    return error(errc::invalid_argument,
                 "transport: max_header_bytes " + std::to_string(config_.max_header_bytes) +
                     " plus the 32-byte frame exceeds UCX's active-message header limit of " +
                     std::to_string(worker_->max_am_header_bytes()) + " bytes; lower it");
  }
  registrations_ =
      std::make_unique<registration_cache>(worker_->context(), config_.registration_cache_entries);
  in_ = std::make_unique<inbound>(worker_->handle(), config_, *registrations_, stats_);
  out_ =
      std::make_unique<outbound>(worker_->handle(), config_, *registrations_, stats_, outstanding_);
  if (status s = in_->install(); !s) return s;

  worker_address address;
  address.node = config_.self_id;
  address.errors = effective_error_mode(config_);
  address.tls = config_.tls;
  address.ucx_address = worker_->address();
  local_address_ = address.encode();

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    return error(errc::io_error,
                 std::string("transport: epoll_create1 failed: ") + std::strerror(errno));
  }
  if (status s = add_to_epoll(epoll_fd_, worker_->event_fd()); !s) return s;
  return add_to_epoll(epoll_fd_, queue_.wake_fd());
}

progress_engine::~progress_engine() {
  if (thread_.joinable()) {
    // Work submitted before this point still runs: shutdown() drains the queue.
    stop_requested_.store(true, std::memory_order_release);
    queue_.wake();
    thread_.join();
  }
  // Order matters: no UCX callback may run once operations are freed, and registrations must
  // be unmapped before the context goes.
  if (worker_) worker_->destroy_worker();
  out_.reset();
  in_.reset();
  registrations_.reset();
  worker_.reset();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void progress_engine::run(std::promise<void>* started) {
  thread_id_ = std::this_thread::get_id();
  pin_thread();
  started->set_value();
  const auto busy_poll = std::chrono::microseconds(config_.busy_poll_us);
  // Reading the clock costs as much as a poll of the worker, so an idle loop looks at it only
  // every clock_stride turns.
  constexpr unsigned clock_stride = 64;
  unsigned idle_turns = 0;
  clock::time_point idle_since;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    bool worked = run_commands();
    if (out_->has_delayed()) worked |= out_->post_due_delays(clock::now());
    worked |= progress();
    if (worked) {
      idle_turns = 0;
      continue;
    }
    if (config_.busy_poll_us > 0) {
      if (idle_turns++ == 0) idle_since = clock::now();
      if (idle_turns % clock_stride != 0 || clock::now() - idle_since < busy_poll) continue;
    }
    sleep();
    idle_turns = 0;
  }
  shutdown();
}

void progress_engine::pin_thread() {
  if (config_.progress_cpu < 0) return;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(config_.progress_cpu, &cpus);
  if (pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus) != 0) {
    log::warn("transport", "cannot pin the progress thread to CPU " +
                               std::to_string(config_.progress_cpu) + "; it runs unpinned");
  }
}

bool progress_engine::run_commands() {
  if (!queue_.take(commands_)) return false;
  for (command_queue::command& c : commands_) {
    if (c.send) {
      out_->submit(std::move(c.send));
    } else {
      c.task();
    }
  }
  commands_.clear();
  return true;
}

bool progress_engine::progress() {
  // Deliveries and completions run after every progress call, not after a whole batch of them:
  // a completion then refills the send window, and a message reaches its handler, without
  // waiting behind unrelated events.
  bool worked = false;
  for (int round = 0; round < max_progress_rounds; ++round) {
    const bool progressed = ucp_worker_progress(worker_->handle()) != 0;
    // Both run every round: deliveries and completions each have their own waiters.
    const bool delivered = in_->after_progress();
    const bool completed = out_->after_progress();
    const bool handled = delivered || completed;
    if (!progressed && !handled) break;
    worked = true;
  }
  out_->check_stalled(clock::now(), std::chrono::milliseconds(config_.send_stall_ms));
  if (!out_->has_failed_peers()) return worked;
  for (auto& [peer, why] : out_->take_failed_peers())
    drop_peer(peer, why, true);
  return true;
}

void progress_engine::sleep() {
  if (!queue_.prepare_to_sleep()) return;
  const ucs_status_t armed = ucp_worker_arm(worker_->handle());
  if (armed == UCS_ERR_BUSY) {
    queue_.woke();
    return;
  }
  int timeout_ms = out_->ms_until_next_delay(clock::now());
  if (!out_->all_closed() || armed != UCS_OK) {
    // Closes complete without an event, and a worker that cannot be armed must be polled.
    timeout_ms = timeout_ms < 0 ? closing_poll_ms : std::min(timeout_ms, closing_poll_ms);
  }
  if (config_.send_stall_ms > 0 && out_->has_in_flight()) {
    // Sends in flight are watched for a stall even when nothing else wakes the thread.
    timeout_ms = timeout_ms < 0 ? stall_watch_poll_ms : std::min(timeout_ms, stall_watch_poll_ms);
  }
  epoll_event events[2];
  epoll_wait(epoll_fd_, events, 2, timeout_ms);
  queue_.woke();
}

void progress_engine::drop_peer(peer_id peer, const error& why, bool report_failure) {
  out_->disconnect(peer, why);
  in_->depart(peer, why);
  out_->after_progress();
  if (report_failure && on_peer_failure_) on_peer_failure_(peer, why);
}

status progress_engine::post(std::function<void()> task) {
  if (on_progress_thread()) {
    task();
    return ok_status();
  }
  return queue_.push_task(std::move(task));
}

status progress_engine::call(std::function<status()> task) {
  if (on_progress_thread()) return task();
  std::promise<status> done;
  std::future<status> outcome = done.get_future();
  status queued = queue_.push_task([&] { done.set_value(task()); });
  if (!queued) return queued;
  return outcome.get();
}

status progress_engine::submit(std::unique_ptr<send_operation> op) {
  if (outstanding_.fetch_add(1, std::memory_order_acq_rel) >= config_.max_outstanding_sends) {
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    return error(errc::resource_exhausted,
                 "transport: " + std::to_string(config_.max_outstanding_sends) +
                     " sends are already outstanding (max_outstanding_sends); wait for "
                     "completions before sending more");
  }
  if (on_progress_thread()) {
    if (stopped_) {
      outstanding_.fetch_sub(1, std::memory_order_acq_rel);
      return error(errc::cancelled, "transport: shutting down; the send was not started");
    }
    out_->submit(std::move(op));
    return ok_status();
  }
  status queued = queue_.push_send(op);
  if (!queued) outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  return queued;
}

void progress_engine::shutdown() {
  // Whatever was queued before the stop request still runs; then the queue refuses more.
  for (command_queue::command& c : queue_.close()) {
    if (c.send) {
      out_->submit(std::move(c.send));
    } else {
      c.task();
    }
  }
  stopped_ = true;
  const error why(errc::cancelled, "transport: shutting down");
  out_->close_all(false, why);
  const auto deadline = clock::now() + std::chrono::milliseconds(config_.close_timeout_ms);
  while (!out_->all_closed() && clock::now() < deadline)
    progress();
  out_->abandon_closing(why);
  progress();
  out_->release_requests();
  in_->release_requests();
}

}  // namespace brigade::transport

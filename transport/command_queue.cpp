#include "transport/command_queue.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace brigade::transport {

command_queue::command_queue(std::size_t max_tasks)
    : max_tasks_(max_tasks), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

command_queue::~command_queue() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

status command_queue::push_send(std::unique_ptr<send_operation>& op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return error(errc::cancelled, "transport: shutting down; the send was not queued");
    queued_.push_back(command{std::move(op), {}});
    has_work_.store(true, std::memory_order_release);
  }
  wake_if_sleeping();
  return ok_status();
}

status command_queue::push_task(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return error(errc::cancelled, "transport: shutting down; the task was not queued");
    if (queued_tasks_ >= max_tasks_) {
      return error(errc::resource_exhausted,
                   "transport: " + std::to_string(max_tasks_) +
                       " control tasks are already queued for the progress thread");
    }
    ++queued_tasks_;
    queued_.push_back(command{nullptr, std::move(task)});
    has_work_.store(true, std::memory_order_release);
  }
  wake_if_sleeping();
  return ok_status();
}

std::vector<command_queue::command> command_queue::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  queued_tasks_ = 0;
  std::vector<command> rest;
  rest.swap(queued_);
  return rest;
}

bool command_queue::take(std::vector<command>& out) {
  out.clear();
  if (!has_work_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  has_work_.store(false, std::memory_order_relaxed);
  if (queued_.empty()) return false;
  out.swap(queued_);
  queued_tasks_ = 0;
  return true;
}

bool command_queue::prepare_to_sleep() {
  sleeping_.store(true, std::memory_order_seq_cst);
  // A producer that pushed before seeing sleeping_ == true left its work in queued_; the lock
  // orders that push before this check, so the work is seen here or the producer writes the fd.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queued_.empty()) {
    sleeping_.store(false, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void command_queue::woke() {
  sleeping_.store(false, std::memory_order_relaxed);
  std::uint64_t count = 0;
  while (::read(wake_fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
  }
}

void command_queue::wake_if_sleeping() {
  if (sleeping_.load(std::memory_order_seq_cst)) wake();
}

void command_queue::wake() {
  const std::uint64_t one = 1;
  // A full eventfd counter (EAGAIN) still wakes the reader, so the result needs no check.
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace brigade::transport

#include "transport/send_completion.hpp"

namespace brigade::transport {

completion_handler send_future::handler() const {
  return [s = state_](const status& outcome) {
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->outcome = outcome;
    }
    s->done.notify_all();
  };
}

bool send_future::ready() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->outcome.has_value();
}

std::optional<status> send_future::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->done.wait_for(lock, timeout, [&] { return state_->outcome.has_value(); });
  return state_->outcome;
}

}  // namespace brigade::transport

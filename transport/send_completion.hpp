// How a sender learns the outcome of a send: a callback, or a future-like handle built on one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "common/result.hpp"

namespace brigade::transport {

/// Called once on the progress thread when a send completes: ok once UCX has handed the payload
/// over (the buffer may then be reused), or an error when the peer is gone, the link is severed
/// or the transport is shutting down. It must not block.
using completion_handler = std::function<void(const status& outcome)>;

/// A future for one send: pass handler() to send(), then wait on the future from any thread.
class send_future {
 public:
  send_future() : state_(std::make_shared<state>()) {}

  /// The callback that fulfils this future; pass it to send().
  completion_handler handler() const;

  bool ready() const;
  /// The outcome, or nullopt if the send is still pending after `timeout`.
  std::optional<status> wait_for(std::chrono::milliseconds timeout) const;

 private:
  struct state {
    mutable std::mutex mutex;
    std::condition_variable done;
    std::optional<status> outcome;
  };
  std::shared_ptr<state> state_;
};

}  // namespace brigade::transport

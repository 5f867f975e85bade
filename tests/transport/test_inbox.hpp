// Catch2 test helpers: a thread-safe inbox that records what a channel receives, a pair of
// connected transports in one process, and ways to hold a progress thread still.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/transport/test_support.hpp"
#include "transport/channel_options.hpp"
#include "transport/node_transport.hpp"

namespace brigade::transport::testing {

struct recorded_message {
  peer_id from = 0;
  channel_id channel = 0;
  std::uint64_t sequence = 0;
  std::string header;
  byte_buffer payload;
};

struct recorded_failure {
  peer_id from = 0;
  channel_id channel = 0;
  error why;
};

class inbox {
 public:
  /// Channel options that record into this inbox.
  channel_options options(bool drop_duplicates = false);

  /// Waits until at least `count` messages arrived; false on timeout.
  bool wait_for_messages(std::size_t count, std::chrono::milliseconds timeout = wait_limit);
  bool wait_for_failures(std::size_t count, std::chrono::milliseconds timeout = wait_limit);
  std::vector<recorded_message> messages() const;
  std::vector<recorded_failure> failures() const;
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<recorded_message> messages_;
  std::vector<recorded_failure> failures_;
};

/// Two transports in this process, connected both ways, each with an inbox on channel 1. The
/// transports stop before any inbox is destroyed, since their handlers point into the inboxes.
struct transport_pair {
  transport_pair(const std::string& tls, bool drop_duplicates = false,
                 transport_config overrides_a = {}, bool use_overrides = false);
  ~transport_pair();
  /// A further inbox that lives as long as the pair.
  inbox& add_inbox() { return extra_inboxes.emplace_back(); }

  inbox inbox_a;
  inbox inbox_b;
  std::deque<inbox> extra_inboxes;
  std::unique_ptr<node_transport> a;
  std::unique_ptr<node_transport> b;
};

/// Blocks a transport's progress thread (from inside a posted task) until released or destroyed,
/// so a test can hold a peer still while it acts on the other side.
class stalled_progress {
 public:
  explicit stalled_progress(node_transport& transport);
  /// Like the above, but runs `first` on the progress thread just before stalling it.
  stalled_progress(node_transport& transport, std::function<void()> first);
  ~stalled_progress() { release(); }
  void release();

 private:
  std::promise<void> release_;
  bool released_ = false;
};

/// Polls `condition` until it holds or the wait limit passes.
bool eventually(const std::function<bool()>& condition);

/// Sends and waits for the outcome; fails the test on timeout.
status send_and_wait(node_transport& from, peer_id to, channel_id channel, std::string header,
                     byte_buffer payload);

}  // namespace brigade::transport::testing

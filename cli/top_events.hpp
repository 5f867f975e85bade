// The expert-balancing events of a server for `brigade top`: GET /v1/events is a stream that
// lasts while the client stays, so a thread of its own reads it and keeps the last events.
//
//   connect ---> streaming (events appended, `since` advances) ---> stream ends or fails
//      ^                                                                   |
//      +---------------- wait retry_ms (the error is kept) <--------------+
//   stop(): the blocked read is interrupted and the thread joined.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/top_source.hpp"

namespace brigade::cli {

class top_events {
 public:
  /// Kinds of event told apart at most; events of kinds past that are dropped.
  static constexpr size_t max_kinds = 16;

  /// Starts reading at once; keeps the last `keep` events of each kind (a measurement every
  /// window would else push a migration's events out at once), and retries every `retry_ms`.
  top_events(top_target target, std::string api_key, size_t keep, int64_t retry_ms);
  ~top_events();
  top_events(const top_events&) = delete;
  top_events& operator=(const top_events&) = delete;

  /// The last events of every kind, oldest first.
  std::vector<nlohmann::json> last() const;
  /// Why the stream is down; "" while it is up or before it first failed.
  std::string error() const;

 private:
  void loop();
  /// One stream, from connecting until it ends.
  void read_stream(uint64_t since);

  const top_target target_;
  const std::string api_key_;
  const size_t keep_;
  const int64_t retry_ms_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;                     // guarded by mutex_
  bool done_ = false;                     // guarded by mutex_: the thread left loop()
  serve::http_client* client_ = nullptr;  // guarded by mutex_: the stream being read
  uint64_t since_ = 0;                    // guarded by mutex_: the last sequence number seen
  // Guarded by mutex_: the last events by kind, at most keep_ of each and max_kinds kinds.
  std::map<std::string, std::deque<nlohmann::json>> events_;
  std::string error_;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace brigade::cli

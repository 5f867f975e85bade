// Counters a node's transport keeps, for tests, benchmarks and introspection.
#pragma once

#include <atomic>
#include <cstdint>

namespace brigade::transport {

/// A snapshot of the counters.
struct transport_stats {
  std::uint64_t sent_messages = 0;  ///< Sends that completed successfully.
  std::uint64_t sent_bytes = 0;     ///< Payload bytes of those sends.
  std::uint64_t failed_sends = 0;   ///< Sends that completed with an error.
  std::uint64_t delivered_messages = 0;
  std::uint64_t delivered_bytes = 0;
  std::uint64_t dropped_duplicates = 0;
  std::uint64_t dropped_malformed = 0;   ///< Frames that failed to decode.
  std::uint64_t dropped_unroutable = 0;  ///< No such channel, or the sender was disconnected.
  std::uint64_t failed_receives = 0;
  std::uint64_t rendezvous_receives_started = 0;
  std::uint64_t faults_applied = 0;
  std::uint64_t registration_hits = 0;
  std::uint64_t registration_misses = 0;
};

/// The live counters: written by the progress thread, read from anywhere.
struct stats_counters {
  std::atomic<std::uint64_t> sent_messages{0};
  std::atomic<std::uint64_t> sent_bytes{0};
  std::atomic<std::uint64_t> failed_sends{0};
  std::atomic<std::uint64_t> delivered_messages{0};
  std::atomic<std::uint64_t> delivered_bytes{0};
  std::atomic<std::uint64_t> dropped_duplicates{0};
  std::atomic<std::uint64_t> dropped_malformed{0};
  std::atomic<std::uint64_t> dropped_unroutable{0};
  std::atomic<std::uint64_t> failed_receives{0};
  std::atomic<std::uint64_t> rendezvous_receives_started{0};
  std::atomic<std::uint64_t> faults_applied{0};
  std::atomic<std::uint64_t> registration_hits{0};
  std::atomic<std::uint64_t> registration_misses{0};

  /// Adds `n` from the progress thread; a relaxed increment is all the counters need.
  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  transport_stats snapshot() const;
};

}  // namespace brigade::transport

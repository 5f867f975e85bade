// The driving side of `brigade bench transport`: pings, streams and their timing, run on the
// transport's progress thread so that the figures are the transport's own (no thread hand-off
// between messages, as ucx_perftest has none).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "bench/transport_wire.hpp"
#include "common/result.hpp"
#include "transport/node_transport.hpp"

namespace brigade::bench::transport_bench {

class transport_driver {
 public:
  using clock = std::chrono::steady_clock;

  /// Opens the ping and ack channels on `transport`, whose peer is peer_node.
  explicit transport_driver(transport::node_transport& transport);

  /// Round-trip times in microseconds of `count` 8 B pings after `warmup` unrecorded ones; each
  /// pong sends the next ping from the progress thread.
  result<std::vector<double>> ping_pong(int warmup, int count);
  /// Median round trip in microseconds when another thread sends each ping and sleeps until the
  /// pong wakes it, as an actor thread would.
  result<double> cross_thread_round_trip_us(int count);
  /// Seconds to send `count` messages of `bytes` bytes with at most `window` in flight, until the
  /// peer acknowledges the last one.
  result<double> stream_seconds(std::size_t bytes, int count, int window);

 private:
  struct ping_state {
    int remaining = 0;
    bool record = false;
    bool from_progress_thread = true;
    /// Time stamp counter when the last ping left. Like ucx_perftest, the ping-pong stamps with
    /// the TSC: clock_gettime costs about as much as the round trip being measured.
    std::uint64_t sent_ticks = 0;
    std::vector<std::uint64_t> round_trip_ticks;
    std::promise<status> done;
    /// Pongs seen, for the cross-thread round trip, whose sender sleeps until one arrives.
    std::mutex mutex;
    std::condition_variable answered;
    std::uint64_t pongs = 0;
  };
  struct stream_state {
    int to_send = 0;
    int in_flight = 0;
    int window = 0;
    transport::byte_buffer payload;
    std::string header;
    std::uint32_t round = 0;
    bool finished = false;
    clock::time_point started;
    clock::time_point acked;
    std::promise<status> done;
  };

  void on_pong();
  void send_ping();
  void fill_window();
  void finish_stream(status outcome);
  static status wait(std::promise<status>& promise);

  transport::node_transport& transport_;
  transport::byte_buffer ping_payload_;
  ping_state ping_;
  stream_state stream_;
};

}  // namespace brigade::bench::transport_bench

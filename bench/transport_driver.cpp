#include "bench/transport_driver.hpp"

#include <x86intrin.h>

#include <algorithm>
#include <cstring>

namespace brigade::bench::transport_bench {

using namespace brigade::transport;

namespace {

/// Bound on any single measurement, so a broken peer fails the benchmark instead of hanging it.
constexpr std::chrono::seconds measurement_limit{300};

double elapsed_us(transport_driver::clock::time_point from,
                  transport_driver::clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

}  // namespace

transport_driver::transport_driver(node_transport& transport)
    : transport_(transport), ping_payload_(byte_buffer::allocate(8)) {
  std::memset(ping_payload_.data(), 0x5a, 8);
  channel_options pong;
  pong.on_message = [this](received_message&) { on_pong(); };
  transport_.open_channel(ping_channel, pong);
  channel_options ack;
  ack.on_message = [this](received_message& m) {
    bulk_round round;
    if (!bulk_round::decode(m.header.data(), m.header.size(), round)) return;
    if (round.round != stream_.round || stream_.finished) return;
    stream_.acked = clock::now();
    finish_stream(ok_status());
  };
  transport_.open_channel(ack_channel, ack);
}

status transport_driver::wait(std::promise<status>& promise) {
  std::future<status> outcome = promise.get_future();
  if (outcome.wait_for(measurement_limit) != std::future_status::ready) {
    return error(errc::unavailable, "bench transport: the peer stopped answering");
  }
  return outcome.get();
}

void transport_driver::send_ping() {
  ping_.sent_ticks = __rdtsc();
  status sent = transport_.send(peer_node, ping_channel, byte_view(), ping_payload_);
  if (!sent) {
    ping_.remaining = 0;
    ping_.done.set_value(sent);
  }
}

void transport_driver::on_pong() {
  if (!ping_.from_progress_thread) {
    {
      std::lock_guard<std::mutex> lock(ping_.mutex);
      ++ping_.pongs;
    }
    ping_.answered.notify_one();
    return;
  }
  if (ping_.remaining <= 0) return;
  if (ping_.record) ping_.round_trip_ticks.push_back(__rdtsc() - ping_.sent_ticks);
  if (--ping_.remaining == 0) {
    ping_.done.set_value(ok_status());
    return;
  }
  send_ping();
}

result<std::vector<double>> transport_driver::ping_pong(int warmup, int count) {
  for (const bool record : {false, true}) {
    ping_.done = std::promise<status>();
    ping_.from_progress_thread = true;
    ping_.record = record;
    ping_.round_trip_ticks.clear();
    ping_.round_trip_ticks.reserve(static_cast<std::size_t>(count));
    ping_.remaining = record ? count : std::max(warmup, 1);
    // The run itself calibrates the time stamp counter against the steady clock.
    const clock::time_point start = clock::now();
    const std::uint64_t start_ticks = __rdtsc();
    if (status s = transport_.post([this] { send_ping(); }); !s) return s.err();
    if (status s = wait(ping_.done); !s) return s.err();
    if (!record) continue;
    const double us_per_tick =
        elapsed_us(start, clock::now()) / static_cast<double>(__rdtsc() - start_ticks);
    std::vector<double> round_trips_us;
    round_trips_us.reserve(ping_.round_trip_ticks.size());
    for (std::uint64_t ticks : ping_.round_trip_ticks) {
      round_trips_us.push_back(static_cast<double>(ticks) * us_per_tick);
    }
    return round_trips_us;
  }
  return error(errc::internal, "bench transport: unreachable");
}

result<double> transport_driver::cross_thread_round_trip_us(int count) {
  // Stop the progress-thread ping loop from reacting to these pongs.
  transport_.post([this] { ping_.from_progress_thread = false; });
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(count));
  std::unique_lock<std::mutex> lock(ping_.mutex);
  for (int i = 0; i < count; ++i) {
    const std::uint64_t before = ping_.pongs;
    const clock::time_point start = clock::now();
    if (status s = transport_.send(peer_node, ping_channel, byte_view(), ping_payload_); !s) {
      return s.err();
    }
    if (!ping_.answered.wait_for(lock, measurement_limit, [&] { return ping_.pongs != before; })) {
      return error(errc::unavailable, "bench transport: a ping got no answer");
    }
    samples.push_back(elapsed_us(start, clock::now()));
  }
  std::nth_element(samples.begin(), samples.begin() + count / 2, samples.end());
  return samples[static_cast<std::size_t>(count / 2)];
}

void transport_driver::fill_window() {
  while (!stream_.finished && stream_.in_flight < stream_.window && stream_.to_send > 0) {
    --stream_.to_send;
    ++stream_.in_flight;
    status sent = transport_.send(peer_node, bulk_channel, stream_.header, stream_.payload,
                                  [this](const status& outcome) {
                                    --stream_.in_flight;
                                    if (!outcome) {
                                      finish_stream(outcome);
                                      return;
                                    }
                                    fill_window();
                                  });
    if (!sent) finish_stream(sent);
  }
}

void transport_driver::finish_stream(status outcome) {
  if (stream_.finished) return;
  stream_.finished = true;
  stream_.done.set_value(std::move(outcome));
}

result<double> transport_driver::stream_seconds(std::size_t bytes, int count, int window) {
  if (stream_.payload.size() != bytes) {
    stream_.payload = byte_buffer::allocate(bytes);
    std::memset(stream_.payload.data(), 0x3c, bytes);
  }
  stream_.done = std::promise<status>();
  std::future<status> outcome = stream_.done.get_future();
  ++stream_.round;
  const bulk_round round{stream_.round, static_cast<std::uint32_t>(count)};
  stream_.header = round.encode();
  stream_.to_send = count;
  stream_.in_flight = 0;
  stream_.window = window;
  stream_.finished = false;
  status posted = transport_.post([this] {
    stream_.started = clock::now();
    fill_window();
  });
  if (!posted) return posted.err();
  if (outcome.wait_for(measurement_limit) != std::future_status::ready) {
    return error(errc::unavailable, "bench transport: the peer stopped acknowledging");
  }
  if (status s = outcome.get(); !s) return s.err();
  return std::chrono::duration<double>(stream_.acked - stream_.started).count();
}

}  // namespace brigade::bench::transport_bench

// The peer process of `brigade bench transport`: echoes pings and acknowledges bulk rounds.
// Its control plane is the pipe to the driver: it prints its address, reads the driver's, and
// runs until its stdin closes.
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/transport_bench.hpp"
#include "bench/transport_wire.hpp"
#include "common/hex.hpp"
#include "transport/node_transport.hpp"

namespace brigade::bench::transport_bench {
namespace {

using namespace brigade::transport;

/// One receive buffer that every bulk payload lands in, touched once up front. This is what
/// ucx_perftest's receiver does (its rendezvous receives all write one buffer), so both sides
/// move the same bytes through the same cache; the benchmark measures the transport, not page
/// faults or cache misses of a receiver that keeps fresh buffers.
class sink_buffer {
 public:
  explicit sink_buffer(std::size_t bytes) : buffer_(byte_buffer::allocate(bytes)) {
    std::memset(buffer_.data(), 0, bytes);
  }
  byte_buffer slice(std::size_t bytes) const {
    return bytes <= buffer_.size() ? buffer_.slice(0, bytes) : byte_buffer::allocate(bytes);
  }

 private:
  byte_buffer buffer_;
};

/// Counts bulk messages per round and acknowledges a round once all its messages arrived.
struct bulk_sink {
  node_transport* transport = nullptr;
  bulk_round current;
  std::uint32_t received = 0;

  void on_message(received_message& m) {
    bulk_round round;
    if (!bulk_round::decode(m.header.data(), m.header.size(), round)) return;
    if (round.round != current.round) {
      current = round;
      received = 0;
    }
    if (++received == round.messages) {
      transport->send(m.from, ack_channel, round.encode(), byte_buffer());
    }
  }
};

}  // namespace

int run_peer(const std::string& tls, int cpu, std::uint32_t busy_poll_us) {
  transport_config config;
  config.self_id = peer_node;
  config.tls = tls;
  config.net_devices = "lo";
  config.progress_cpu = cpu;
  config.busy_poll_us = busy_poll_us;
  result<std::unique_ptr<node_transport>> started = node_transport::start(config);
  if (!started) {
    std::cout << "ERROR " << started.err().describe() << std::endl;
    return 1;
  }
  node_transport& t = **started;
  channel_options ping;
  ping.on_message = [&t](received_message& m) {
    t.send(m.from, ping_channel, byte_view(), std::move(m.payload));
  };
  auto sink = std::make_shared<sink_buffer>(std::size_t{64} << 20);
  bulk_sink counter{&t, {}, 0};
  channel_options bulk;
  bulk.on_message = [&counter](received_message& m) { counter.on_message(m); };
  bulk.allocate = [sink](peer_id, channel_id, std::size_t bytes) -> result<byte_buffer> {
    return sink->slice(bytes);
  };
  if (!t.open_channel(ping_channel, ping) || !t.open_channel(bulk_channel, bulk)) {
    std::cout << "ERROR cannot open channels" << std::endl;
    return 1;
  }
  std::cout << "ADDR " << to_hex(t.local_address()) << std::endl;
  std::string word;
  std::string hex;
  if (!(std::cin >> word >> hex) || word != "ADDR") return 1;
  const auto driver_address = from_hex(hex);
  if (!driver_address) {
    std::cout << "ERROR the driver's address is not hex: " << hex << std::endl;
    return 1;
  }
  status connected =
      t.connect(driver_node, byte_view(driver_address->data(), driver_address->size()));
  if (!connected) {
    std::cout << "ERROR " << connected.err().describe() << std::endl;
    return 1;
  }
  std::cout << "READY" << std::endl;
  while (std::cin >> word) {
  }
  return 0;
}

}  // namespace brigade::bench::transport_bench

// A transport in its own process, driven line by line over stdin by the two-process tests
// (which play the control plane). Channel 1 echoes; channel 2 answers with the payload's
// checksum on channel 3.
//
//   usage: transport_test_peer <node id> <UCX_TLS>
//   prints "ADDR <hex>", then answers commands:
//     CONNECT <id> <hex>           -> OK | ERR <why>
//     DISCONNECT <id>              -> OK
//     SEND <id> <channel> <bytes> <seed>  (waits for completion) -> SENT ok | SENT <why>
//     STALL                        -> STALLED (the progress thread blocks for good)
//     QUIT                         -> exits
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "common/hex.hpp"
#include "tests/transport/test_support.hpp"
#include "transport/node_transport.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

namespace {

void open_channels(node_transport& t) {
  channel_options echo;
  echo.on_message = [&t](received_message& m) {
    t.send(m.from, 1, m.header, std::move(m.payload));
  };
  channel_options sum;
  sum.on_message = [&t](received_message& m) {
    const std::string answer =
        std::to_string(checksum(m.payload.view())) + ":" + std::to_string(m.payload.size());
    t.send(m.from, 3, answer, byte_buffer());
  };
  t.open_channel(1, echo);
  t.open_channel(2, sum);
}

std::string run_send(node_transport& t, std::istringstream& args) {
  peer_id to = 0;
  channel_id channel = 0;
  std::size_t bytes = 0;
  std::uint64_t seed = 0;
  args >> to >> channel >> bytes >> seed;
  send_future done;
  status queued = t.send(to, channel, "seed:" + std::to_string(seed), random_payload(bytes, seed),
                         done.handler());
  if (!queued) return "SENT " + queued.err().describe();
  std::optional<status> outcome = done.wait_for(wait_limit);
  if (!outcome) return "SENT timed out";
  return outcome->ok() ? "SENT ok" : "SENT " + outcome->err().describe();
}

std::string run_command(node_transport& t, const std::string& line) {
  std::istringstream args(line);
  std::string word;
  args >> word;
  if (word == "CONNECT") {
    peer_id id = 0;
    std::string hex;
    args >> id >> hex;
    const auto address = from_hex(hex);
    if (!address) return "ERR the address is not hex: " + hex;
    status s = t.connect(id, byte_view(address->data(), address->size()));
    return s ? "OK" : "ERR " + s.err().describe();
  }
  if (word == "DISCONNECT") {
    peer_id id = 0;
    args >> id;
    t.disconnect(id, "told to by the test");
    return "OK";
  }
  if (word == "SEND") return run_send(t, args);
  if (word == "STALL") {
    std::promise<void> entered;
    std::future<void> stalled = entered.get_future();
    t.post([&entered] {
      entered.set_value();
      // Stand still until the test kills this process.
      while (true)
        std::this_thread::sleep_for(std::chrono::hours(1));
    });
    stalled.wait();
    return "STALLED";
  }
  return "ERR unknown command '" + word + "'";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: transport_test_peer <node id> <UCX_TLS>\n";
    return 2;
  }
  auto started = node_transport::start(test_config(std::stoull(argv[1]), argv[2]));
  if (!started) {
    std::cout << "ERR " << started.err().describe() << std::endl;
    return 1;
  }
  node_transport& t = **started;
  open_channels(t);
  std::cout << "ADDR " << to_hex(t.local_address()) << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "QUIT") break;
    std::cout << run_command(t, line) << std::endl;
  }
  return 0;
}

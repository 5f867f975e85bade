// A TCP fault proxy for chaos runs: it listens on one port, gives every client connection its own
// connection to a target, and forwards bytes both ways until it is told to cut the cable
// (partition), to drop every connection (reset) or to slow the line down (delay).
//
// Modes, switched by set_mode() from any thread; the loop applies a change within milliseconds:
//
//                 set_mode(partition...)
//        +------+ ---------------------> +-------------+
//        | pass |                        | partition   |  nothing forwarded, nothing closed:
//        |      | <--------------------- | (or one way)|  bytes and closes are held
//        +------+    set_mode(pass):     +-------------+
//         ^    |     the partition heals      |
//         |    |                              | set_mode(reset)
//         |    | set_mode(reset)              v
//         |    +---------------------> +-------------+
//         +--------------------------- | reset       |  every connection aborted (RST),
//              set_mode(pass)          +-------------+  new ones aborted as accepted
//
// Any mode may follow any other; the arrows are the transitions a chaos run uses.
//
// One connection's life:
//
//   accepted --(mode is pass)--> connecting --(target accepts)--> open
//      |                            ^     |                          |
//      | (a partition is on)        |     | (target refuses:         | (both sides closed,
//      v                            |     |  the client is closed)   |  or one side failed)
//    held --(the partition heals)---+     v                          |
//                                       closed <---------------------+
//
// Reset mode, the hold bound and the destructor abort a connection from any state.
//
// A partition looks to both peers like a cut cable: data and FINs are held (up to a bound) and
// delivered in order when it heals, as TCP retransmission would; a connection accepted during a
// partition dials the target only when it heals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/result.hpp"

namespace brigade::chaos {

/// What the proxy does with the bytes and closes it reads.
enum class proxy_mode {
  pass,                        ///< Forward both ways.
  partition,                   ///< Hold everything both ways until the mode changes.
  partition_client_to_target,  ///< Hold only what clients send; forward what the target sends.
  partition_target_to_client,  ///< Hold only what the target sends; forward what clients send.
  reset,                       ///< Abort every connection, and each new one as it is accepted.
};

const char* to_string(proxy_mode mode);

struct proxy_options {
  /// Where the proxy listens; port 0 picks a free port (read it back with tcp_proxy::port()).
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  /// Where each client connection is forwarded to.
  std::string target_host = "127.0.0.1";
  uint16_t target_port = 0;
  /// The most bytes one connection holds in one direction during a partition; a connection that
  /// needs more is aborted and counted in proxy_stats::connections_reset_over_hold_limit.
  size_t hold_limit_bytes = size_t{64} << 20;
  /// The most bytes one connection buffers in one direction while forwarding: past it, the proxy
  /// stops reading that side until the other side takes them (back-pressure). At most
  /// hold_limit_bytes.
  size_t forward_buffer_bytes = size_t{1} << 20;
  /// The most connections open at once; further clients wait in the kernel's accept queue.
  size_t max_connections = 1024;
  /// The delay at start (see tcp_proxy::set_delay_ms).
  uint32_t delay_ms = 0;
};

/// Counters since start; each is read on its own, so together they are only roughly consistent.
struct proxy_stats {
  /// Client connections accepted, including those aborted at once in reset mode.
  uint64_t connections_accepted = 0;
  /// Client connections accepted and not yet closed.
  uint64_t connections_open = 0;
  /// Bytes written to the target and to clients.
  uint64_t bytes_to_target = 0;
  uint64_t bytes_to_client = 0;
  /// Bytes read from one side and not yet written to the other (held or in flight).
  uint64_t bytes_held = 0;
  /// Connections aborted because a partition made them hold more than hold_limit_bytes.
  uint64_t connections_reset_over_hold_limit = 0;
  /// Connections aborted by reset mode.
  uint64_t connections_reset_by_mode = 0;
  /// Connections closed because the target could not be reached.
  uint64_t target_connect_failures = 0;
};

class tcp_proxy {
 public:
  /// Listens and starts the forwarding thread; fails when the listen address cannot be bound or
  /// an address does not resolve.
  static result<std::unique_ptr<tcp_proxy>> start(const proxy_options& options);
  /// Stops the thread and aborts every connection; returns without waiting on any peer.
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  /// The port the proxy listens on.
  uint16_t port() const { return port_; }

  void set_mode(proxy_mode mode);
  proxy_mode mode() const;
  /// Every chunk read (and every close) is passed on no earlier than delay_ms after it was read;
  /// a change applies to what is read after it.
  void set_delay_ms(uint32_t delay_ms);
  uint32_t delay_ms() const;

  proxy_stats stats() const;

 private:
  /// The forwarding loop and its sockets; defined in tcp_proxy.cpp.
  class loop;

  tcp_proxy(std::unique_ptr<loop> forwarding, uint16_t port);

  std::unique_ptr<loop> loop_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace brigade::chaos

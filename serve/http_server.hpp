// The HTTP/1.1 server: Boost.Beast on an Asio io_context with a few threads, callback style.
// Keep-alive, bounded request bodies and connections, SSE over chunked encoding with every chunk
// written as soon as it exists, and cancellation at the service when a client goes away.
// Beast stays inside http_server.cpp; this header is cheap to include.
//
//   constructed --start()--> listening --stop_accepting()--> draining --stop()--> stopped
//                                 \---------------------stop()------------------/
//
// stop() cancels generations still in flight, waits (bounded) until the service has ended each
// of them, closes every connection and joins the I/O threads. The service may be stopped before
// or after; it must not be destroyed before the server is stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.hpp"
#include "serve/api_handler.hpp"

namespace brigade::serve {

struct http_server_options {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;              ///< 0 picks a free port (see port()).
  int io_threads = 2;                ///< Threads running the io_context.
  int max_connections = 512;         ///< Beyond this, new connections get 503 and are closed.
  size_t max_body_bytes = 8u << 20;  ///< Larger request bodies get 413.
  int idle_timeout_s = 60;           ///< A keep-alive connection idle this long is closed.
  int write_timeout_s = 60;          ///< A client that reads nothing this long is dropped.
  int stop_timeout_s = 10;           ///< How long stop() waits for in-flight generations.
};

class http_server {
 public:
  /// `handler` (and the service behind it) must outlive the server.
  http_server(api_handler& handler, const http_server_options& options);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds, listens and starts the I/O threads; fails with a message naming the address.
  status start();
  /// The port bound by start() (useful with port 0).
  uint16_t port() const;
  /// "http://HOST:PORT".
  std::string url() const;

  /// Closes the listening socket; connections already open are served to the end.
  void stop_accepting();
  /// Generations submitted and not yet ended by the service.
  int active_generations() const;
  /// Connections open now.
  int open_connections() const;
  /// See the lifecycle above. Idempotent.
  void stop();

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace brigade::serve

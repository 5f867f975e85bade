// A small blocking HTTP/1.1 client over one keep-alive connection, for the tests and the load
// generator of `brigade bench serve`: plain requests, and SSE streams read event by event as
// they arrive. Beast stays inside http_client.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace brigade::serve {

struct http_response {
  int status = 0;
  std::string content_type;
  std::string body;  ///< The whole body; for a stream, the raw SSE text read.
  std::vector<std::pair<std::string, std::string>> headers;
  bool chunked = false;
  bool keep_alive = false;

  /// The first header of that name (case-insensitive), or "".
  std::string header(const std::string& name) const;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

class http_client {
 public:
  http_client(std::string host, uint16_t port);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Sends a request and reads the whole answer. Connects (again) when needed.
  result<http_response> request(const std::string& method, const std::string& target,
                                const std::string& body = "", const header_list& headers = {});
  /// POSTs `body` (JSON) and reads an SSE answer, calling on_event with each event's data as it
  /// arrives; when on_event returns false the connection is closed at once (a client hanging
  /// up). An answer that is not an event stream is read whole into the response.
  result<http_response> stream(const std::string& target, const std::string& body,
                               const header_list& headers,
                               const std::function<bool(const std::string&)>& on_event,
                               const std::string& method = "POST");
  /// Drops the connection.
  void close();
  /// Ends a request that blocks in another thread: its reads and writes fail at once, and the
  /// client connects no more (a caller that bounds how long it waits). The only call allowed
  /// from another thread.
  void interrupt();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Connects, writes `bytes` as they are, and reads until the server closes the connection or
/// `max_bytes` arrived: for tests of malformed HTTP.
result<std::string> raw_exchange(const std::string& host, uint16_t port, const std::string& bytes,
                                 size_t max_bytes = 1 << 20);

}  // namespace brigade::serve

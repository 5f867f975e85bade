// The client's Beast translation unit.
#include "serve/http_client.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include <sys/socket.h>

#include "serve/sse.hpp"

namespace brigade::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

template <class Body>
void copy_head(const http::response<Body>& res, http_response& out) {
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.chunked = res.chunked();
  out.keep_alive = res.keep_alive();
  for (const auto& f : res)
    out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
}

}  // namespace

std::string http_response::header(const std::string& name) const {
  const std::string want = lower(name);
  for (const auto& [k, v] : headers) {
    if (lower(k) == want) return v;
  }
  return "";
}

struct http_client::impl {
  std::string host;
  uint16_t port;
  net::io_context ioc;
  std::optional<tcp::socket> socket;
  beast::flat_buffer buffer;
  std::atomic<int> native{-1};  // the connected socket, for interrupt() from another thread
  std::atomic<bool> interrupted{false};  // no connection is made after interrupt()

  status connect() {
    if (interrupted) return error(errc::cancelled, "the request was interrupted");
    if (socket && socket->is_open()) return ok_status();
    beast::error_code ec;
    const auto address = net::ip::make_address(host, ec);
    if (ec) return error(errc::invalid_argument, "'" + host + "' is not an IP address");
    socket.emplace(ioc);
    socket->connect(tcp::endpoint(address, port), ec);
    buffer.clear();
    if (ec) {
      socket.reset();
      return error(errc::unavailable,
                   "cannot connect to " + host + ":" + std::to_string(port) + ": " + ec.message());
    }
    // Requests go out in one write; without Nagle nothing waits for an ACK behind them.
    socket->set_option(tcp::no_delay(true), ec);
    native = socket->native_handle();
    return ok_status();
  }

  status send(const std::string& method, const std::string& target, const std::string& body,
              const header_list& headers) {
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, host + ":" + std::to_string(port));
    req.set(http::field::user_agent, "brigade-http-client");
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    for (const auto& [k, v] : headers)
      req.set(k, v);
    req.body() = body;
    req.keep_alive(true);
    req.prepare_payload();
    beast::error_code ec;
    http::write(*socket, req, ec);
    if (ec) return error(errc::io_error, "sending " + method + " " + target + ": " + ec.message());
    return ok_status();
  }

  error failed(const std::string& what, beast::error_code ec) {
    close();
    return error(errc::io_error, what + ": " + ec.message());
  }

  void close() {
    if (!socket) return;
    native = -1;
    beast::error_code ignored;
    socket->shutdown(tcp::socket::shutdown_both, ignored);
    socket->close(ignored);
    socket.reset();
  }
};

http_client::http_client(std::string host, uint16_t port) : impl_(std::make_unique<impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
}

http_client::~http_client() {
  impl_->close();
}

void http_client::close() {
  impl_->close();
}

void http_client::interrupt() {
  impl_->interrupted = true;
  const int fd = impl_->native.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

result<http_response> http_client::request(const std::string& method, const std::string& target,
                                           const std::string& body, const header_list& headers) {
  // A kept-alive connection the server has since closed fails on first use: retry once afresh.
  for (int attempt = 0;; ++attempt) {
    if (status c = impl_->connect(); !c) return c.err();
    if (status s = impl_->send(method, target, body, headers); !s) {
      impl_->close();
      if (attempt == 0) continue;
      return s.err();
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    beast::error_code ec;
    http::read(*impl_->socket, impl_->buffer, parser, ec);
    if (ec == http::error::end_of_stream && attempt == 0) {
      impl_->close();
      continue;
    }
    if (ec) return impl_->failed("reading the answer to " + method + " " + target, ec);
    http_response out;
    copy_head(parser.get(), out);
    out.body = std::move(parser.get().body());
    if (!out.keep_alive) impl_->close();
    return out;
  }
}

result<http_response> http_client::stream(const std::string& target, const std::string& body,
                                          const header_list& headers,
                                          const std::function<bool(const std::string&)>& on_event,
                                          const std::string& method) {
  if (status c = impl_->connect(); !c) return c.err();
  if (status s = impl_->send(method, target, body, headers); !s) {
    impl_->close();
    return s.err();
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  beast::error_code ec;
  http::read_header(*impl_->socket, impl_->buffer, parser, ec);
  if (ec) return impl_->failed("reading the header of " + method + " " + target, ec);
  http_response out;
  copy_head(parser.get(), out);
  if (out.content_type.rfind("text/event-stream", 0) != 0) {
    http::read(*impl_->socket, impl_->buffer, parser, ec);
    if (ec) return impl_->failed("reading the answer to " + method + " " + target, ec);
    out.body = std::move(parser.get().body());
    if (!out.keep_alive) impl_->close();
    return out;
  }
  sse_reader reader;
  std::vector<std::string> events;
  bool hung_up = false;
  // Each chunk of the body is handed over as it arrives, rather than kept in the parser.
  auto on_chunk = [&](std::uint64_t, beast::string_view data, beast::error_code&) -> std::size_t {
    out.body.append(data.data(), data.size());
    reader.feed(std::string_view(data.data(), data.size()), events);
    for (const auto& e : events) {
      if (!hung_up && !on_event(e)) hung_up = true;
    }
    events.clear();
    return data.size();
  };
  parser.on_chunk_body(on_chunk);
  while (!parser.is_done() && !hung_up) {
    http::read_some(*impl_->socket, impl_->buffer, parser, ec);
    if (ec) return impl_->failed("reading the stream of " + method + " " + target, ec);
  }
  if (hung_up || !out.keep_alive) impl_->close();
  if (reader.failed()) return error(errc::bad_format, "the event stream breaks SSE framing");
  return out;
}

result<std::string> raw_exchange(const std::string& host, uint16_t port, const std::string& bytes,
                                 size_t max_bytes) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address(host, ec), port), ec);
  if (ec) return error(errc::unavailable, "cannot connect: " + ec.message());
  net::write(socket, net::buffer(bytes), ec);
  if (ec) return error(errc::io_error, "writing: " + ec.message());
  std::string out;
  char buf[4096];
  while (out.size() < max_bytes) {
    const size_t n = socket.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;  // The server closed the connection (eof) or reset it.
  }
  return out;
}

}  // namespace brigade::serve

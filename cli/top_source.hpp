// Where `brigade top` gets its data: the server's address from --url, and the poll of
// GET /v1/status and GET /v1/experts into a snapshot, with failures turned into what to do.
#pragma once

#include <cstdint>
#include <string>

#include "cli/top_view.hpp"
#include "common/result.hpp"
#include "serve/http_client.hpp"

namespace brigade::cli {

/// A server to poll.
struct top_target {
  std::string url;   ///< As given, without a trailing '/'.
  std::string host;  ///< An IP address: a host name is resolved once, at start.
  uint16_t port = 80;
};

/// Parses "http://HOST[:PORT][/]" (https is refused: the client speaks plain HTTP).
result<top_target> parse_url(const std::string& url);

/// What to tell the user when GET `path` answered HTTP `status` with `body`: what failed and
/// what to do about it.
std::string describe_http_failure(const std::string& path, int status, const std::string& body,
                                  bool have_api_key);

/// What to tell the user when `url` cannot be reached (`why`: the client's error).
std::string describe_unreachable(const std::string& url, const std::string& why);

/// Polls one server over one kept-alive connection.
class top_poller {
 public:
  top_poller(top_target target, std::string api_key);

  /// GETs /v1/status and /v1/experts into `into`: on success status, experts and error ""; on
  /// failure only error, so the frame keeps what the last good poll showed.
  void poll(top_snapshot& into);
  /// Ends a poll blocked on the server, from a signal handler too (the client then stays
  /// closed): it only stores an atomic flag and shuts the socket down.
  void interrupt() { client_.interrupt(); }

 private:
  /// The body of GET `path` parsed, or what went wrong.
  result<nlohmann::json> get(const std::string& path);

  top_target target_;
  std::string api_key_;
  serve::http_client client_;
};

}  // namespace brigade::cli

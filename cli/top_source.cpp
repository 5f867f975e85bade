#include "cli/top_source.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <cstdlib>
#include <utility>

namespace brigade::cli {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_ip(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The first address of `host` in `family`, as text; "" when it has none.
std::string resolve(const std::string& host, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return "";
  char text[NI_MAXHOST];
  const int rc =
      getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(found);
  return rc == 0 ? text : "";
}

// The message of an OpenAI error object in `body`, or "".
std::string server_message(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& e = j["error"];
  return e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
}

}  // namespace

result<top_target> parse_url(const std::string& url) {
  if (starts_with(url, "https://"))
    return error(errc::unsupported, "--url " + url + ": brigade top speaks plain HTTP only");
  std::string rest = starts_with(url, "http://") ? url.substr(7) : url;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    if (rest.find_first_not_of('/', slash) != std::string::npos)
      return error(errc::invalid_argument,
                   "--url " + url + ": give the server's root (http://HOST:PORT), not a path");
    rest.resize(slash);
  }
  top_target t;
  std::string port = "80";
  if (starts_with(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == std::string::npos)
      return error(errc::invalid_argument, "--url " + url + ": no ']'");
    t.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':')
        return error(errc::invalid_argument, "--url " + url + ": bad port");
      port = rest.substr(close + 2);
    }
  } else {
    const size_t colon = rest.rfind(':');
    t.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  char* end = nullptr;
  const long number = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || number < 1 || number > 65535)
    return error(errc::invalid_argument, "--url " + url + ": the port must be 1 to 65535");
  if (t.host.empty()) return error(errc::invalid_argument, "--url " + url + ": no host");
  t.port = static_cast<uint16_t>(number);
  if (!is_ip(t.host)) {
    const std::string name = t.host;
    t.host = resolve(name, AF_INET);
    if (t.host.empty()) t.host = resolve(name, AF_INET6);
    if (t.host.empty()) return error(errc::not_found, "--url " + url + ": cannot resolve " + name);
  }
  t.url = url;
  while (!t.url.empty() && t.url.back() == '/')
    t.url.pop_back();
  return t;
}

std::string describe_http_failure(const std::string& path, int status, const std::string& body,
                                  bool have_api_key) {
  const std::string where = "GET " + path + " answered HTTP " + std::to_string(status);
  if (status == 401 && have_api_key) {
    return "the server refused the key given with --api-key (" + where +
           "): pass one it was started with (brigade serve --api-key or serve.api_keys)";
  }
  if (status == 401) {
    return "the server needs an API key (" + where +
           "): run brigade top --api-key KEY with one it was started with (brigade serve "
           "--api-key or serve.api_keys)";
  }
  const std::string message = server_message(body);
  if (status == 404) {
    return where + (message.empty() ? "" : " (" + message + ")") +
           ": is --url a brigade serve, and of this version?";
  }
  return where + (message.empty() ? "" : ": " + message);
}

std::string describe_unreachable(const std::string& url, const std::string& why) {
  return "no answer from " + url + " (" + why +
         "): is brigade serve running there? Start it, or point --url at it";
}

top_poller::top_poller(top_target target, std::string api_key)
    : target_(std::move(target)),
      api_key_(std::move(api_key)),
      client_(target_.host, target_.port) {}

result<nlohmann::json> top_poller::get(const std::string& path) {
  serve::header_list headers;
  if (!api_key_.empty()) headers.emplace_back("Authorization", "Bearer " + api_key_);
  auto answer = client_.request("GET", path, "", headers);
  if (!answer)
    return error(errc::unavailable, describe_unreachable(target_.url, answer.err().message));
  if (answer->status != 200)
    return error(errc::unavailable,
                 describe_http_failure(path, answer->status, answer->body, !api_key_.empty()));
  auto body = nlohmann::json::parse(answer->body, nullptr, false);
  if (body.is_discarded())
    return error(errc::bad_format, "GET " + path +
                                       " answered text that is not JSON: is --url a "
                                       "brigade serve?");
  return body;
}

void top_poller::poll(top_snapshot& into) {
  auto status = get("/v1/status");
  if (!status) {
    into.error = status.err().message;
    return;
  }
  auto experts = get("/v1/experts");
  if (!experts) {
    into.error = experts.err().message;
    return;
  }
  into.status = std::move(status).value();
  into.experts = std::move(experts).value();
  into.error.clear();
}

}  // namespace brigade::cli

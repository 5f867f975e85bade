#include "serve/api_error.hpp"

#include <nlohmann/json.hpp>

namespace brigade::serve {

api_error bad_request(std::string param, std::string message, std::string code) {
  api_error e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string error_body(const api_error& e) {
  nlohmann::json inner = {{"message", e.message}, {"type", e.type}};
  inner["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  inner["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  return nlohmann::json({{"error", inner}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

api_error from_service_error(const error& e) {
  api_error out;
  out.message = e.message;
  switch (e.code) {
    case errc::invalid_argument:
    case errc::unsupported:
      out.http_status = 400;
      break;
    case errc::resource_exhausted:
      out.http_status = 429;
      out.type = "server_overloaded";
      out.code = "queue_full";
      break;
    case errc::unavailable:
    case errc::cancelled:
      out.http_status = 503;
      out.type = "service_unavailable";
      break;
    case errc::not_found:
      out.http_status = 404;
      out.type = "not_found_error";
      break;
    default:
      out.http_status = 500;
      out.type = "internal_server_error";
      break;
  }
  return out;
}

}  // namespace brigade::serve

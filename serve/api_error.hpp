// OpenAI-style error answers: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::serve {

struct api_error {
  int http_status = 400;
  std::string message;                         ///< Says what was wrong and what to do.
  std::string type = "invalid_request_error";  ///< OpenAI's error type.
  std::string param;                           ///< The request field at fault; empty for null.
  std::string code;                            ///< A machine-readable code; empty for null.
};

/// A 400 naming `param`.
api_error bad_request(std::string param, std::string message, std::string code = "");

/// The error object's JSON text.
std::string error_body(const api_error& e);

/// The answer for a service error: invalid_argument 400, resource_exhausted 429, unavailable
/// 503, not_found 404, unsupported 400, anything else 500.
api_error from_service_error(const error& e);

}  // namespace brigade::serve

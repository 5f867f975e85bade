#include "common/result.hpp"

namespace brigade {

const char* to_string(errc code) {
  switch (code) {
    case errc::invalid_argument:
      return "invalid argument";
    case errc::not_found:
      return "not found";
    case errc::io_error:
      return "i/o error";
    case errc::bad_format:
      return "bad format";
    case errc::unsupported:
      return "unsupported";
    case errc::resource_exhausted:
      return "resource exhausted";
    case errc::cancelled:
      return "cancelled";
    case errc::unavailable:
      return "unavailable";
    case errc::internal:
      return "internal error";
  }
  return "unknown error";
}

}  // namespace brigade

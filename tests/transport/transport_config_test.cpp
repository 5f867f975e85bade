#include <catch2/catch.hpp>

#include "transport/transport_config.hpp"

using namespace brigade;
using namespace brigade::transport;

TEST_CASE("the error mode follows the TLS set", "[transport][config]") {
  transport_config c;
  c.tls = "tcp";
  CHECK(effective_error_mode(c) == error_mode::peer);
  c.tls = "posix,sysv,cma,self";
  CHECK(effective_error_mode(c) == error_mode::none);
  c.tls = "sm,self";
  CHECK(effective_error_mode(c) == error_mode::none);
  c.tls = "tcp,sysv";
  CHECK(effective_error_mode(c) == error_mode::none);
  c.tls = "";
  CHECK(effective_error_mode(c) == error_mode::none);
  c.tls = "^posix";
  CHECK(effective_error_mode(c) == error_mode::none);
  c.tls = "tcp";
  c.errors = error_mode::none;
  CHECK(effective_error_mode(c) == error_mode::none);
}

TEST_CASE("configurations that cannot work are refused up front", "[transport][config]") {
  transport_config c;
  c.tls = "posix,sysv,cma,self";
  c.errors = error_mode::peer;
  status s = validate(c);
  REQUIRE(!s.ok());
  CHECK_THAT(s.err().message, Catch::Contains("shared-memory"));
  c = transport_config{};
  c.max_outstanding_sends = 0;
  CHECK(!validate(c).ok());
  c = transport_config{};
  c.max_header_bytes = 1 << 20;
  CHECK(!validate(c).ok());
  CHECK(validate(transport_config{}).ok());
}

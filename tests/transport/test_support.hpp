// Test helpers that need no test framework (the test peer process uses them too): configs,
// payloads and checksums.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "transport/byte_buffer.hpp"
#include "transport/transport_config.hpp"

namespace brigade::transport::testing {

/// Generous bound on every wait in these tests: they fail instead of hanging.
inline constexpr std::chrono::milliseconds wait_limit{20000};

/// The two TLS sets every transport test runs over.
inline const char* const tcp_tls = "tcp";
inline const char* const shm_tls = "posix,sysv,cma,self";

/// Configuration for a test transport: loopback only, explicit TLS.
transport_config test_config(peer_id self, const std::string& tls);

/// A payload of `bytes` pseudo-random bytes from `seed`.
byte_buffer random_payload(std::size_t bytes, std::uint64_t seed);
/// FNV-1a 64 of the bytes.
std::uint64_t checksum(byte_view bytes);

}  // namespace brigade::transport::testing

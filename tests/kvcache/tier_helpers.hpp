// Helpers shared by the host, SSD and tiered-store tests: models, blocks whose bytes are a
// function of their hash (so that any block read back can be checked), and stderr capture.
#pragma once

#include <fcntl.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kvcache/block_payload.hpp"
#include "kvcache/model_fingerprint.hpp"
#include "support/temp_dir.hpp"
#include "support/text.hpp"

namespace brigade::kvcache::testing {

/// 2026-01-01 in ns: a plausible start for manual clocks, whose times become file mtimes.
inline constexpr time_ns test_epoch_ns = 1767225600LL * 1000000000LL;

/// A small model: 2 layers x 2 kv heads x 8 dims x 4 tokens of f32 = 1 KiB per block.
inline model_fingerprint small_model(const std::string& id = "test-model") {
  return *model_fingerprint::make(id, {2, 4, 2, 8, kv_dtype::f32});
}

/// 4 layers x 4 kv heads x 16 dims x 16 tokens of f32 = 32 KiB per block.
inline model_fingerprint large_model(const std::string& id = "test-model-large") {
  return *model_fingerprint::make(id, {4, 16, 4, 16, kv_dtype::f32});
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The bytes block `hash` of `model` always holds in these tests.
inline std::vector<std::uint8_t> bytes_of(const model_fingerprint& model, block_hash hash) {
  std::vector<std::uint8_t> bytes(model.block_bytes());
  std::uint64_t state = mix(hash.hi ^ hash.lo ^ model.digest());
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    state = mix(state);
    for (std::size_t j = 0; j < 8 && i + j < bytes.size(); ++j)
      bytes[i + j] = static_cast<std::uint8_t>(state >> (8 * j));
  }
  return bytes;
}

inline payload_ptr block_of(const model_fingerprint& model, block_hash hash) {
  return *block_payload::make(model, hash, bytes_of(model, hash));
}

/// Whether `payload` is exactly block `hash` of `model`.
inline bool intact(const payload_ptr& payload, const model_fingerprint& model, block_hash hash) {
  return payload != nullptr && payload->model() == model && payload->hash() == hash &&
         payload->bytes() == bytes_of(model, hash);
}

/// Hashes 1000 + i for i in [0, n): distinct, and easy to read in failures.
inline std::vector<block_hash> hashes(std::size_t n, block_hash first = 1000) {
  std::vector<block_hash> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(block_hash{first.hi, first.lo + i});
  return out;
}

/// Flips one byte of a file in place.
inline void flip_byte(const std::string& path, long offset) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fseek(f, offset, SEEK_SET) == 0);
  const int c = std::fgetc(f);
  REQUIRE(c != EOF);
  REQUIRE(std::fseek(f, offset, SEEK_SET) == 0);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

inline bool file_exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

/// Redirects stderr to a file while it lives, so that a test can read what was logged.
class stderr_capture {
 public:
  explicit stderr_capture(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~stderr_capture() { restore(); }
  stderr_capture(const stderr_capture&) = delete;
  stderr_capture& operator=(const stderr_capture&) = delete;

  /// Restores stderr and returns what was written meanwhile.
  std::string text() {
    restore();
    return ::brigade::testing::read_text(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

/// How many times `needle` occurs in `text`.
inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace brigade::kvcache::testing

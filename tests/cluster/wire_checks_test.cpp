// A peer's data-plane header must match its payload exactly. The cases that matter are the ones a
// plain `rows * cols * 4 == size` check lets through: negative or huge counts whose products wrap
// around to the payload's length, here to 0 bytes.
#include "cluster/wire_checks.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

using namespace brigade;
using namespace brigade::cluster;

namespace {

wire::expert_call_header call(int32_t rows, int32_t cols) {
  wire::expert_call_header h;
  h.rows = rows;
  h.cols = cols;
  return h;
}

wire::answer_header answer(int32_t rows, int32_t cols) {
  wire::answer_header h;
  h.ok = 1;
  h.rows = rows;
  h.cols = cols;
  return h;
}

wire::kv_meta_header kv(int32_t tokens, int32_t stop_ids, uint64_t kv_floats) {
  wire::kv_meta_header h;
  h.tokens = tokens;
  h.stop_ids = stop_ids;
  h.kv_floats = kv_floats;
  return h;
}

}  // namespace

TEST_CASE("an expert call's payload is its slots and rows, nothing else", "[cluster][wire]") {
  CHECK(wire::check(call(3, 8), 3 * 4 + 3 * 8 * 4).ok());
  CHECK(wire::check(call(0, 8), 0).ok());
  CHECK_FALSE(wire::check(call(3, 8), 3 * 4 + 3 * 8 * 4 - 1).ok());
  CHECK_FALSE(wire::check(call(3, 8), 3 * 8 * 4).ok());  // rows without their slots
  // (2^64 - 1) * 4 + (2^64 - 1)^2 * 4 wraps to 0 in 64 bits.
  const status wrapped = wire::check(call(-1, -1), 0);
  REQUIRE_FALSE(wrapped.ok());
  CHECK(wrapped.err().code == errc::bad_format);
  CHECK_THAT(wrapped.err().message,
             Catch::Contains("expert call") && Catch::Contains("rows -1, cols -1"));
  CHECK_FALSE(wire::check(call(-1, 0), 0).ok());
  CHECK_FALSE(wire::check(call(2, -1), 0).ok());
  constexpr int32_t big = std::numeric_limits<int32_t>::max();
  CHECK_FALSE(wire::check(call(big, big), 0).ok());
}

TEST_CASE("an answer that says ok carries its rows; an error answer carries none",
          "[cluster][wire]") {
  CHECK(wire::check(answer(2, 4), 2 * 4 * 4).ok());
  CHECK(wire::check(answer(0, 0), 0).ok());  // a KV answer
  CHECK_FALSE(wire::check(answer(2, 4), 2 * 4 * 4 + 4).ok());
  CHECK_FALSE(wire::check(answer(-2, -4), 32).ok());
  // (2^64 - 2^31) * 2^31 * 4 wraps to 0.
  CHECK_FALSE(wire::check(answer(std::numeric_limits<int32_t>::min(), 1 << 30), 0).ok());
  wire::answer_header refusal;
  refusal.rows = -5;
  CHECK(wire::check(refusal, 0).ok());
}

TEST_CASE("a KV handoff's token list and blocks match its header", "[cluster][wire]") {
  CHECK(wire::check(kv(10, 2, 96), 12 * 4, 96 * 4).ok());
  CHECK_FALSE(wire::check(kv(10, 2, 96), 11 * 4, 96 * 4).ok());
  CHECK_FALSE(wire::check(kv(10, 2, 96), 12 * 4, 95 * 4).ok());
  // -1 + 1 tokens is 0 bytes when the counts are added as unsigned 64-bit numbers.
  const status negative = wire::check(kv(-1, 1, 0), 0, 0);
  REQUIRE_FALSE(negative.ok());
  CHECK_THAT(negative.err().message, Catch::Contains("tokens -1, stop ids 1"));
  // 2^62 floats are 2^64 bytes: 0 after wrapping.
  const status huge = wire::check(kv(1, 0, uint64_t{1} << 62), 4, 0);
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.err().message, Catch::Contains("kv_floats 4611686018427387904"));
}

TEST_CASE("a KV handoff's prompt log-probabilities are counted in its token list",
          "[cluster][wire]") {
  // 10 tokens, 9 prompt positions with 2 alternatives each: 9 x 3 pairs of two words.
  wire::kv_meta_header h = kv(10, 0, 96);
  h.prompt_logprobs = 2;
  h.prompt_positions = 9;
  CHECK(wire::check(h, (10 + 9 * 3 * 2) * 4, 96 * 4).ok());
  CHECK_FALSE(wire::check(h, (10 + 9 * 3 * 2 - 1) * 4, 96 * 4).ok());
  // More positions than tokens, or a count out of range, is refused whatever the payload.
  h.prompt_positions = 11;
  CHECK_THAT(wire::check(h, (10 + 11 * 3 * 2) * 4, 96 * 4).err().message,
             Catch::Contains("prompt log-probabilities for 11 positions of 10 tokens"));
  h.prompt_positions = 9;
  h.prompt_logprobs = 21;
  CHECK_FALSE(wire::check(h, (10 + 9 * 22 * 2) * 4, 96 * 4).ok());
}

TEST_CASE("a peer's message without a terminating NUL is read to the array's end only",
          "[cluster][wire]") {
  wire::answer_header h;
  std::memset(h.message, 'x', sizeof h.message);
  CHECK(h.message_text() == std::string(sizeof h.message, 'x'));
  h.set_message("no such shard");
  CHECK(h.message_text() == "no such shard");
}

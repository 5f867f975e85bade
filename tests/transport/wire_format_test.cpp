// Frames, worker-address envelopes and duplicate windows: the bytes that cross the wire.
#include <catch2/catch.hpp>
#include <random>

#include "transport/frame_header.hpp"
#include "transport/sequence_window.hpp"
#include "transport/worker_address.hpp"

using namespace brigade;
using namespace brigade::transport;

namespace {

std::vector<std::byte> encoded_frame(const frame_header& h, std::size_t user_header_bytes) {
  std::vector<std::byte> out(frame_header::wire_bytes + user_header_bytes, std::byte{7});
  h.encode(out.data());
  return out;
}

worker_address sample_address() {
  worker_address a;
  a.node = 42;
  a.errors = error_mode::peer;
  a.tls = "tcp";
  for (int i = 0; i < 100; ++i)
    a.ucx_address.push_back(static_cast<std::byte>(i * 7));
  return a;
}

}  // namespace

TEST_CASE("a frame header survives encode and decode", "[transport][wire]") {
  frame_header h;
  h.channel = 0xBEEF;
  h.header_bytes = 5;
  h.sender = 0x0102030405060708ull;
  h.sequence = 99;
  h.payload_bytes = 1ull << 33;
  const auto bytes = encoded_frame(h, 5);
  result<frame_header> back =
      frame_header::decode(byte_view(bytes.data(), bytes.size()), 1ull << 33);
  REQUIRE(back.ok());
  CHECK(back->channel == h.channel);
  CHECK(back->header_bytes == 5);
  CHECK(back->sender == h.sender);
  CHECK(back->sequence == 99);
  CHECK(back->payload_bytes == h.payload_bytes);
}

TEST_CASE("a malformed frame is rejected with the field that is wrong", "[transport][wire]") {
  frame_header h;
  h.header_bytes = 4;
  h.payload_bytes = 10;
  auto bytes = encoded_frame(h, 4);
  SECTION("too short") {
    auto r = frame_header::decode(byte_view(bytes.data(), 16), 10);
    REQUIRE(!r.ok());
    CHECK(r.err().code == errc::bad_format);
    CHECK_THAT(r.err().message, Catch::Contains("shorter"));
  }
  SECTION("bad magic") {
    bytes[0] = std::byte{0};
    auto r = frame_header::decode(byte_view(bytes.data(), bytes.size()), 10);
    REQUIRE(!r.ok());
    CHECK_THAT(r.err().message, Catch::Contains("magic"));
  }
  SECTION("other version") {
    bytes[2] = std::byte{9};
    auto r = frame_header::decode(byte_view(bytes.data(), bytes.size()), 10);
    REQUIRE(!r.ok());
    CHECK_THAT(r.err().message, Catch::Contains("version 9"));
  }
  SECTION("user header length disagrees") {
    auto r = frame_header::decode(byte_view(bytes.data(), bytes.size() - 1), 10);
    REQUIRE(!r.ok());
    CHECK_THAT(r.err().message, Catch::Contains("user header"));
  }
  SECTION("payload length disagrees") {
    auto r = frame_header::decode(byte_view(bytes.data(), bytes.size()), 11);
    REQUIRE(!r.ok());
    CHECK_THAT(r.err().message, Catch::Contains("payload"));
  }
}

TEST_CASE("a worker address survives its envelope", "[transport][wire]") {
  const worker_address a = sample_address();
  const auto bytes = a.encode();
  result<worker_address> back = worker_address::decode(byte_view(bytes.data(), bytes.size()));
  REQUIRE(back.ok());
  CHECK(back->node == 42);
  CHECK(back->errors == error_mode::peer);
  CHECK(back->tls == "tcp");
  CHECK(back->ucx_address == a.ucx_address);
}

TEST_CASE("a corrupted worker address is rejected and never handed to UCX", "[transport][wire]") {
  const auto good = sample_address().encode();
  const std::uint64_t seed = Catch::rngSeed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    auto bytes = good;
    const std::size_t at = rng() % bytes.size();
    bytes[at] ^= static_cast<std::byte>(1 + rng() % 255);
    INFO("flipped byte " << at);
    CHECK(!worker_address::decode(byte_view(bytes.data(), bytes.size())).ok());
  }
  for (std::size_t cut : {std::size_t{0}, std::size_t{5}, good.size() / 2, good.size() - 1}) {
    CHECK(!worker_address::decode(byte_view(good.data(), cut)).ok());
  }
  const std::string garbage = "not an address at all, just some text of plausible length";
  auto r = worker_address::decode(garbage);
  REQUIRE(!r.ok());
  CHECK(r.err().code == errc::bad_format);
}

TEST_CASE("a sequence window accepts each number once", "[transport][wire]") {
  sequence_window w;
  CHECK(w.accept(1));
  CHECK(!w.accept(1));
  CHECK(w.accept(3));
  CHECK(w.accept(2));
  CHECK(!w.accept(2));
  CHECK(!w.accept(3));
  CHECK(w.accept(200));
  CHECK(!w.accept(200));
  CHECK(w.accept(199));
  CHECK(!w.accept(200 - sequence_window::span));
  CHECK(!w.accept(0));
}

TEST_CASE("a sequence window tolerates any reordering within its span", "[transport][wire]") {
  const std::uint64_t seed = Catch::rngSeed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> order;
  for (std::uint64_t s = 1; s <= 2000; ++s)
    order.push_back(s);
  // Shuffle within blocks of 32, so no number falls more than the span behind.
  for (std::size_t b = 0; b < order.size(); b += 32) {
    std::shuffle(order.begin() + b, order.begin() + std::min(b + 32, order.size()), rng);
  }
  sequence_window w;
  for (std::uint64_t s : order)
    CHECK(w.accept(s));
  for (std::uint64_t s = 2000 - 40; s <= 2000; ++s)
    CHECK(!w.accept(s));
}

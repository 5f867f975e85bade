#include "common/hex.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

using brigade::from_hex;
using brigade::to_hex;

TEST_CASE("hex text round-trips every byte value", "[hex]") {
  std::vector<std::byte> all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<std::byte>(b));
  const std::string text = to_hex(all);
  REQUIRE(text.size() == 512);
  CHECK(text.substr(0, 6) == "000102");
  CHECK(text.substr(506) == "fdfeff");
  const auto back = from_hex(text);
  REQUIRE(back.has_value());
  CHECK(*back == all);
  CHECK(from_hex("") == std::vector<std::byte>{});
  CHECK(from_hex("A0fF") == std::vector<std::byte>{std::byte{0xa0}, std::byte{0xff}});
}

TEST_CASE("from_hex refuses text that is not whole hex bytes", "[hex]") {
  CHECK_FALSE(from_hex("abc").has_value());   // odd length
  CHECK_FALSE(from_hex("0g").has_value());    // not a digit
  CHECK_FALSE(from_hex("12 4").has_value());  // a space
  CHECK_FALSE(from_hex("1\n").has_value());
}

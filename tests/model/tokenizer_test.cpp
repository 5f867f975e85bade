// Encoding and decoding with the hand-checkable fixture tokenizer.
#include <catch2/catch.hpp>
#include <thread>

#include "model/tokenizer.hpp"
#include "tests/model/tokenizer_fixture.hpp"

namespace {

using brigade::model::incremental_decoder;
using brigade::model::tokenizer;
using brigade::model::testing::load_json;
using brigade::model::testing::tiny_tokenizer_json;
using ids = std::vector<int32_t>;

tokenizer tiny() {
  auto tok = load_json(tiny_tokenizer_json());
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

std::string streamed(const tokenizer& tok, const ids& input, bool skip_special) {
  incremental_decoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : input)
    out += dec.push(id);
  return out + dec.finish();
}

}  // namespace

TEST_CASE("merges apply lowest rank first, leftmost among equals", "[tokenizer]") {
  const tokenizer tok = tiny();
  CHECK(tok.encode("hello world") == ids{259, 262, 108, 100});
  CHECK(tok.encode("aaa") == ids{263, 97});  // "a a" at the left first.
  CHECK(tok.encode("abc") == ids{97, 264});  // "b c" outranks "a b".
  CHECK(tok.encode("aab") == ids{263, 98});  // "a a" outranks "a b".
  CHECK(tok.encode("") == ids{});
  CHECK(tok.encode(" ") == ids{32});
}

TEST_CASE("the pre-tokenizer keeps words apart before merging", "[tokenizer]") {
  const tokenizer tok = tiny();
  // "hel" and "lo" are separate words, so "ll" never forms across the digit.
  CHECK(tok.encode("hel1lo") == ids{256, 108, 49, 108, 111});
  // Digits are split one by one by Qwen's pattern.
  CHECK(tok.encode("123") == ids{49, 50, 51});
}

TEST_CASE("added tokens written in the text map to their ids", "[tokenizer]") {
  const tokenizer tok = tiny();
  CHECK(tok.encode("<|im_start|>hello<|im_end|>") == ids{300, 259, 301});
  CHECK(tok.encode("a<think>b") == ids{97, 302, 98});
  // A partial token is ordinary text.
  CHECK(tok.encode("<|im_end").size() == 8);
  CHECK(tok.encode("<|im_start|><|im_start|>") == ids{300, 300});
}

TEST_CASE("decode reverses encode and can skip special tokens", "[tokenizer]") {
  const tokenizer tok = tiny();
  const std::string text = "<|im_start|>hello world<think> \xC3\xA9\xE2\x82\xAC<|im_end|>";
  const ids encoded = tok.encode(text);
  CHECK(tok.decode(encoded) == text);
  CHECK(tok.decode(encoded, /*skip_special=*/true) == "hello world<think> \xC3\xA9\xE2\x82\xAC");
  // Ids outside the vocabulary are skipped.
  CHECK(tok.decode({259, -1, 100000, 262}) == "hello wor");
}

TEST_CASE("text is NFC-normalized before encoding", "[tokenizer]") {
  const tokenizer tok = tiny();
  // "e" + COMBINING ACUTE becomes U+00E9, two bytes C3 A9.
  CHECK(tok.encode("e\xCC\x81") == ids{0xC3, 0xA9});
  CHECK(tok.decode(tok.encode("e\xCC\x81")) == "\xC3\xA9");
}

TEST_CASE("invalid UTF-8 input is encoded as U+FFFD", "[tokenizer]") {
  const tokenizer tok = tiny();
  CHECK(tok.encode("a\xFF") == tok.encode("a\xEF\xBF\xBD"));
  CHECK(tok.decode(tok.encode("\xC3")) == "\xEF\xBF\xBD");
}

TEST_CASE("decode replaces bytes that are not UTF-8", "[tokenizer]") {
  const tokenizer tok = tiny();
  CHECK(tok.decode({0xE2, 0x82}) == "\xEF\xBF\xBD");
  CHECK(tok.decode({0xFF, 104}) ==
        "\xEF\xBF\xBD"
        "h");
}

TEST_CASE("the incremental decoder never splits a character", "[tokenizer]") {
  const tokenizer tok = tiny();
  incremental_decoder dec(tok);
  // U+20AC EURO SIGN arrives one byte token at a time.
  CHECK(dec.push(0xE2).empty());
  CHECK(dec.push(0x82).empty());
  CHECK(dec.push(0xAC) == "\xE2\x82\xAC");
  // A four-byte emoji (U+1F600) after ASCII: the ASCII comes out at once.
  CHECK(dec.push(104) == "h");
  CHECK(dec.push(0xF0).empty());
  CHECK(dec.push(0x9F).empty());
  CHECK(dec.push(0x98).empty());
  CHECK(dec.push(0x80) == "\xF0\x9F\x98\x80");
  CHECK(dec.finish().empty());
}

TEST_CASE("the incremental decoder replaces broken bytes", "[tokenizer]") {
  const tokenizer tok = tiny();
  incremental_decoder dec(tok);
  CHECK(dec.push(0xFF) == "\xEF\xBF\xBD");  // Can never start a character: out at once.
  CHECK(dec.push(0xE2).empty());
  CHECK(dec.push(104) ==
        "\xEF\xBF\xBD"
        "h");  // The lead byte was cut off.
  CHECK(dec.push(0xE2).empty());
  CHECK(dec.finish() == "\xEF\xBF\xBD");
}

TEST_CASE("the incremental decoder skips special tokens by default", "[tokenizer]") {
  const tokenizer tok = tiny();
  const ids input = tok.encode("<|im_start|>hello<think><|im_end|>");
  CHECK(streamed(tok, input, true) == "hello<think>");
  CHECK(streamed(tok, input, false) == "<|im_start|>hello<think><|im_end|>");
}

TEST_CASE("streaming decode equals decode on every prefix split", "[tokenizer]") {
  const tokenizer tok = tiny();
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD w\xE4\xB8\xAD<|im_end|>";
  const ids input = tok.encode(text);
  for (std::size_t cut = 0; cut <= input.size(); ++cut) {
    const ids prefix(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK(streamed(tok, prefix, false) == tok.decode(prefix));
  }
}

TEST_CASE("lookups: size, token ids, special flags", "[tokenizer]") {
  const tokenizer tok = tiny();
  CHECK(tok.size() == 303);
  CHECK(tok.token_id("<|im_end|>") == 301);
  CHECK(tok.token_id("Ġwor") == 262);
  CHECK_FALSE(tok.token_id("nope").has_value());
  CHECK(tok.is_special(300));
  CHECK_FALSE(tok.is_special(302));
  CHECK_FALSE(tok.is_special(259));
  CHECK_FALSE(tok.bos_id().has_value());
}

TEST_CASE("tokenizer_config.json names bos and eos", "[tokenizer]") {
  const nlohmann::json config = {{"bos_token", {{"content", "<|im_start|>"}}},
                                 {"eos_token", "<|im_end|>"}};
  auto tok = load_json(tiny_tokenizer_json(), config);
  REQUIRE(tok.ok());
  CHECK(tok->bos_id() == 300);
  CHECK(tok->eos_id() == 301);
}

TEST_CASE("concurrent encodes agree with a single thread", "[tokenizer]") {
  const tokenizer tok = tiny();
  const std::string text =
      "hello world, hello again: aaa abc <think> 12345 \xE4\xB8\xAD\xE6\x96\x87";
  const ids expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i)
        failures[t] += tok.encode(text) != expected;
    });
  }
  for (auto& th : threads)
    th.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("long inputs encode without trouble", "[tokenizer]") {
  const tokenizer tok = tiny();
  for (const std::string& unit : {std::string(" "), std::string("a"), std::string("\xC3\xA9"),
                                  std::string("\r\n"), std::string("9")}) {
    std::string text;
    while (text.size() < 100000)
      text += unit;
    const ids encoded = tok.encode(text);
    CHECK(tok.decode(encoded) == text);
  }
}

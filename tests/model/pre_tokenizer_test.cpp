// The regex pre-tokenizer and the UTF-8 helpers under it.
#include <catch2/catch.hpp>

#include "model/byte_level.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/utf8.hpp"

namespace {

using brigade::model::pre_tokenizer;
using pieces = std::vector<std::string>;

pieces split(const pre_tokenizer& pre, const std::string& text) {
  pieces out;
  pre.split(text, out);
  return out;
}

pre_tokenizer qwen() {
  pre_tokenizer pre;
  REQUIRE(pre.add_split_regex(brigade::model::kQwenSplitPattern,
                              pre_tokenizer::split_behavior::isolated, false)
              .ok());
  return pre;
}

}  // namespace

TEST_CASE("Qwen's pattern splits words, digits, contractions and whitespace", "[pre_tokenizer]") {
  const pre_tokenizer pre = qwen();
  CHECK(split(pre, "Hello world's 123\n\n  x") ==
        pieces{"Hello", " world", "'s", " ", "1", "2", "3", "\n\n", " ", " x"});
  // Contractions match in any case; other apostrophes go with the punctuation.
  CHECK(split(pre, "WE'LL it'S") == pieces{"WE", "'LL", " it", "'S"});
  // A tab may lead a word, as a space does; line breaks may not.
  CHECK(split(pre, "a\r\n\tb") == pieces{"a", "\r\n", "\tb"});
  CHECK(split(pre, "x  = y;\n") == pieces{"x", " ", " =", " y", ";\n"});
  // Letters of any script form words; CJK has no spaces to split on.
  CHECK(split(pre, "\xE6\x97\xA5\xE6\x9C\xAC \xD0\xBC\xD0\xB8\xD1\x80") ==
        pieces{"\xE6\x97\xA5\xE6\x9C\xAC", " \xD0\xBC\xD0\xB8\xD1\x80"});
}

TEST_CASE("the GPT-2 pattern of ByteLevel(use_regex) and its prefix space", "[pre_tokenizer]") {
  pre_tokenizer pre;
  REQUIRE(pre.add_byte_level(/*add_prefix_space=*/true, /*use_regex=*/true).ok());
  CHECK(split(pre, "Hello 12345 world") == pieces{" Hello", " 12345", " world"});
  CHECK(split(pre, " x") == pieces{" x"});
}

TEST_CASE("Removed drops the matches and invert keeps only them", "[pre_tokenizer]") {
  pre_tokenizer removed;
  REQUIRE(removed.add_split_regex("\\s+", pre_tokenizer::split_behavior::removed, false).ok());
  CHECK(split(removed, " a  b c ") == pieces{"a", "b", "c"});
  pre_tokenizer inverted;
  REQUIRE(inverted.add_split_regex("\\d+", pre_tokenizer::split_behavior::removed, true).ok());
  CHECK(split(inverted, "a12b345") == pieces{"12", "345"});
  pre_tokenizer literal;
  REQUIRE(literal.add_split_literal("+", pre_tokenizer::split_behavior::isolated, false).ok());
  CHECK(split(literal, "a+b") == pieces{"a", "+", "b"});
}

TEST_CASE("each Split behavior does with matches what the Hugging Face library does",
          "[pre_tokenizer]") {
  using behavior = pre_tokenizer::split_behavior;
  const auto split_with = [](behavior b, bool invert, const std::string& text) {
    pre_tokenizer pre;
    REQUIRE(pre.add_split_literal("-", b, invert).ok());
    return split(pre, text);
  };
  CHECK(split_with(behavior::isolated, false, "a-b--c") == pieces{"a", "-", "b", "-", "-", "c"});
  CHECK(split_with(behavior::removed, false, "a-b--c") == pieces{"a", "b", "c"});
  CHECK(split_with(behavior::merged_with_previous, false, "a-b--c") ==
        pieces{"a-", "b-", "-", "c"});
  CHECK(split_with(behavior::merged_with_next, false, "a-b--c") == pieces{"a", "-b", "-", "-c"});
  CHECK(split_with(behavior::contiguous, false, "a-b--c") == pieces{"a", "-", "b", "--", "c"});
  CHECK(split_with(behavior::merged_with_previous, false, "-a") == pieces{"-", "a"});
  // Inverted, the text between the dashes counts as the matches.
  CHECK(split_with(behavior::merged_with_previous, true, "a-b--c") == pieces{"a", "-b", "-", "-c"});
}

TEST_CASE("Metaspace replaces spaces and splits before each replacement", "[pre_tokenizer]") {
  const std::string m = "\xE2\x96\x81";
  pre_tokenizer pre;
  REQUIRE(pre.add_metaspace(m, pre_tokenizer::prepend_scheme::first, true).ok());
  CHECK(split(pre, "Hey  friend!") == pieces{m + "Hey", m, m + "friend!"});
  pieces later;
  pre.split("Hey you", later, /*at_start=*/false);
  CHECK(later == pieces{"Hey", m + "you"});
}

TEST_CASE("a pattern that can match empty still terminates", "[pre_tokenizer]") {
  pre_tokenizer pre;
  REQUIRE(pre.add_split_regex("x*", pre_tokenizer::split_behavior::isolated, false).ok());
  CHECK(split(pre, "axxb\xC3\xA9") == pieces{"a", "xx", "b\xC3\xA9"});
}

TEST_CASE("a regex that does not compile is an error naming it", "[pre_tokenizer]") {
  pre_tokenizer pre;
  const auto s = pre.add_split_regex("(unclosed", pre_tokenizer::split_behavior::isolated, false);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.err().message, Catch::Contains("(unclosed"));
}

TEST_CASE("byte-level characters map every byte and back", "[byte_level]") {
  namespace bl = brigade::model::byte_level;
  CHECK(bl::char_of(' ') == "\xC4\xA0");   // U+0120 'Ġ'
  CHECK(bl::char_of('\n') == "\xC4\x8A");  // U+010A 'Ċ'
  CHECK(bl::char_of('a') == "a");
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  std::string back;
  bl::decode_append(bl::encode(all), back);
  CHECK(back == all);
  CHECK(bl::is_byte_level(bl::encode(all)));
  CHECK_FALSE(bl::is_byte_level(" "));
}

TEST_CASE("UTF-8 validation and repair", "[utf8]") {
  namespace u = brigade::model::utf8;
  CHECK(u::is_valid("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  CHECK_FALSE(u::is_valid("\xC0\xAF"));          // Overlong.
  CHECK_FALSE(u::is_valid("\xED\xA0\x80"));      // A surrogate.
  CHECK_FALSE(u::is_valid("\xF4\x90\x80\x80"));  // Past U+10FFFF.
  CHECK_FALSE(u::is_valid("\xE2\x82"));          // Truncated.
  CHECK(u::repair("a\xE2\x82"
                  "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(u::repair("\xF0\x9F\x98") == "\xEF\xBF\xBD");
  CHECK(u::repair("\xFF\xFE") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(u::complete_prefix_size("ab\xE2\x82") == 2);
  CHECK(u::complete_prefix_size("ab\xF0") == 2);
  CHECK(u::complete_prefix_size("ab\xE2\x82\xAC") == 5);
  CHECK(u::complete_prefix_size("ab\xFF") == 3);   // Never completes: not held back.
  CHECK(u::complete_prefix_size("ab\xE2(") == 4);  // Already broken: not held back.
}

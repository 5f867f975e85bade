// The SentencePiece-style forms of tokenizer.json that Llama, Mistral and Mixtral ship (the
// legacy Prepend/Replace normalizer, Metaspace, byte_fallback, the "<s> $A" template) and the
// added-token options, on the hand-checkable fixture of tokenizer_fixture.hpp.
#include <catch2/catch.hpp>

#include "model/tokenizer.hpp"
#include "tests/model/tokenizer_fixture.hpp"

namespace {

using brigade::model::incremental_decoder;
using brigade::model::tokenizer;
using brigade::model::testing::llama_tokenizer_json;
using brigade::model::testing::load_json;
using brigade::model::testing::tiny_tokenizer_json;
using ids = std::vector<int32_t>;
using json = nlohmann::json;

const std::string kSpace = "\xE2\x96\x81";

tokenizer load(const json& j) {
  auto tok = load_json(j);
  INFO((tok.ok() ? std::string() : tok.err().describe()));
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

// The fixture with the legacy normalizer traded for a Metaspace pre-tokenizer.
json metaspace(const char* scheme, bool split) {
  json j = llama_tokenizer_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", scheme}, {"split", split}};
  return j;
}

std::string streamed(const tokenizer& tok, const ids& input, bool skip_special) {
  incremental_decoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : input)
    out += dec.push(id);
  return out + dec.finish();
}

}  // namespace

TEST_CASE("the legacy Llama form prepends and replaces spaces before merging", "[tokenizer]") {
  const tokenizer tok = load(llama_tokenizer_json());
  CHECK(tok.encode("hello world") == ids{271, 274, 262, 266});
  CHECK(tok.encode("hello  world") == ids{271, 259, 274, 262, 266});
  CHECK(tok.encode(" hello") == ids{259, 271});
  CHECK(tok.encode("") == ids{});
  // Each run between added tokens gets its own "▁", as the Hugging Face library does it.
  CHECK(tok.encode("<s>hello</s>hello") == ids{1, 271, 2, 271});
  CHECK(tok.decode(tok.encode("hello  world")) == "hello  world");
  CHECK(tok.decode(tok.encode(" hello")) == " hello");
  CHECK(tok.decode({1, 271}) == "<s> hello");
  CHECK(tok.decode({1, 271}, /*skip_special=*/true) == "hello");
  CHECK(tok.token_text(271) == kSpace + "hello");
  CHECK(tok.token_text(3 + 0x0A) == "<0x0A>");
}

TEST_CASE("byte_fallback writes missing characters as <0xNN> tokens", "[tokenizer]") {
  const tokenizer tok = load(llama_tokenizer_json());
  CHECK(tok.encode("h\xC3\xA9") == ids{267, 3 + 0xC3, 3 + 0xA9});
  CHECK(tok.decode(tok.encode("h\xC3\xA9 \xF0\x9F\x98\x80")) == "h\xC3\xA9 \xF0\x9F\x98\x80");
  // Byte tokens that are not UTF-8 decode to one U+FFFD per byte, as ByteFallback does.
  CHECK(tok.decode({271, 3 + 0xE4, 3 + 0xBD}) == "hello\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(tok.decode({3 + 0xFF, 260}) == "\xEF\xBF\xBDh");
}

TEST_CASE("without byte_fallback unknown characters become <unk>", "[tokenizer]") {
  json j = llama_tokenizer_json();
  j["model"]["byte_fallback"] = false;
  CHECK(load(j).encode("h\xC3\xA9\xC3\xA9") == ids{267, 0});  // fuse_unk: one for the run
  j["model"]["fuse_unk"] = false;
  CHECK(load(j).encode("h\xC3\xA9\xC3\xA9") == ids{267, 0, 0});
  j["model"]["unk_token"] = nullptr;  // Then the Hugging Face library drops them.
  CHECK(load(j).encode("h\xC3\xA9") == ids{267});
  j["model"]["unk_token"] = "<nope>";
  auto tok = load_json(j);
  REQUIRE_FALSE(tok.ok());
  CHECK_THAT(tok.err().message, Catch::Contains("model.unk_token '<nope>'"));
}

TEST_CASE("Metaspace prepends as its prepend_scheme says", "[tokenizer]") {
  const tokenizer always = load(metaspace("always", true));
  CHECK(always.encode("hello world") == ids{271, 274, 262, 266});
  CHECK(always.encode("<s>hello") == ids{1, 271});
  const tokenizer first = load(metaspace("first", true));
  CHECK(first.encode("hello") == ids{271});
  CHECK(first.encode("<s>hello") == ids{1, 260, 261, 268, 263});
  CHECK(first.encode("hello<s>hello") == ids{271, 1, 260, 261, 268, 263});
  const tokenizer never = load(metaspace("never", true));
  CHECK(never.encode("hello") == ids{260, 261, 268, 263});
  CHECK(never.encode(" hello") == ids{271});
  // The older form: add_prefix_space false means "never".
  json legacy = metaspace("always", true);
  legacy["pre_tokenizer"].erase("prepend_scheme");
  legacy["pre_tokenizer"]["add_prefix_space"] = false;
  CHECK(load(legacy).encode("hello") == ids{260, 261, 268, 263});
}

TEST_CASE("Metaspace with split starts a piece at every replacement", "[tokenizer]") {
  // Split, "▁▁" is two pieces and never merges; unsplit, it is one word and does.
  CHECK(load(metaspace("always", true)).encode("  ") == ids{259, 259});
  CHECK(load(metaspace("always", false)).encode("  ") == ids{275});
}

TEST_CASE("the Metaspace decoder drops the first token's replacement", "[tokenizer]") {
  json j = llama_tokenizer_json();
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "always"}};
  CHECK(load(j).decode({271, 274, 262, 266}) == "hello world");
  CHECK(load(j).decode({259, 271}) == " hello");
  j["decoder"]["prepend_scheme"] = "never";
  CHECK(load(j).decode({271}) == " hello");
}

TEST_CASE("the post-processor template adds <s> only when asked", "[tokenizer]") {
  const tokenizer tok = load(llama_tokenizer_json());
  CHECK(tok.encode("hello", /*add_special_tokens=*/true) == ids{1, 271});
  CHECK(tok.encode("", true) == ids{1});
  CHECK(tok.encode("hello") == ids{271});
  // A ByteLevel post-processor adds nothing.
  const tokenizer tiny = load(tiny_tokenizer_json());
  CHECK(tiny.encode("hello", true) == tiny.encode("hello"));
}

TEST_CASE("streaming decode equals decode with the Llama decoder", "[tokenizer]") {
  const tokenizer tok = load(llama_tokenizer_json());
  const ids input = tok.encode("hello  w\xC3\xA9 world<s> hello \xF0\x9F\x98\x80 </s>");
  for (std::size_t cut = 0; cut <= input.size(); ++cut) {
    const ids prefix(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK(streamed(tok, prefix, false) == tok.decode(prefix));
    CHECK(streamed(tok, prefix, true) == tok.decode(prefix, true));
  }
}

TEST_CASE("single_word tests \\w; normalized tokens match as normalized", "[tokenizer]") {
  json j = tiny_tokenizer_json();
  j["added_tokens"].push_back({{"id", 303},
                               {"content", "<mask>"},
                               {"single_word", true},
                               {"special", true},
                               {"normalized", false}});
  const tokenizer tiny = load(j);
  const auto has_mask = [&](const std::string& text) {
    const ids encoded = tiny.encode(text);
    return std::find(encoded.begin(), encoded.end(), 303) != encoded.end();
  };
  CHECK(has_mask("a-<mask>"));
  CHECK_FALSE(has_mask("a_<mask>"));  // An underscore is a word character.
  CHECK_FALSE(has_mask("<mask>\xC3\xA9"));
  CHECK(has_mask("<mask>."));

  // With the Llama normalizer, a normalized "hello" is matched as "▁hello".
  json llama = llama_tokenizer_json();
  llama["added_tokens"].push_back(
      {{"id", 276}, {"content", "hello"}, {"special", false}, {"normalized", true}});
  const tokenizer tok = load(llama);
  CHECK(tok.encode("hello world") == ids{276, 274, 262, 266});
  CHECK(tok.encode("<s>hello") == ids{1, 276});
  CHECK(tok.decode({276, 274, 262, 266}) == "hello world");
}

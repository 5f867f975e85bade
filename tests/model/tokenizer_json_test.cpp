// Malformed and unsupported tokenizer.json files: each gets an error naming what was wrong.
#include <catch2/catch.hpp>

#include "tests/model/tokenizer_fixture.hpp"

namespace {

using brigade::errc;
using brigade::model::testing::load_json;
using brigade::model::testing::load_text;
using brigade::model::testing::tiny_tokenizer_json;
using json = nlohmann::json;

// Loads `j` and requires an error of `code` whose message contains every fragment.
void require_error(const json& j, errc code, std::initializer_list<const char*> fragments) {
  auto tok = load_json(j);
  REQUIRE_FALSE(tok.ok());
  INFO(tok.err().describe());
  CHECK(tok.err().code == code);
  for (const char* f : fragments)
    CHECK_THAT(tok.err().message, Catch::Contains(f));
}

}  // namespace

TEST_CASE("the fixture itself loads", "[tokenizer_json]") {
  CHECK(load_json(tiny_tokenizer_json()).ok());
}

TEST_CASE("a missing file is not_found and names the path", "[tokenizer_json]") {
  auto tok = brigade::model::tokenizer::load("/nonexistent/brigade-model");
  REQUIRE_FALSE(tok.ok());
  CHECK(tok.err().code == errc::not_found);
  CHECK_THAT(tok.err().message, Catch::Contains("/nonexistent/brigade-model/tokenizer.json"));
}

TEST_CASE("truncated or empty JSON is bad_format", "[tokenizer_json]") {
  const std::string full = tiny_tokenizer_json().dump();
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, full.size() / 2, full.size() - 1}) {
    auto tok = load_text(full.substr(0, size));
    REQUIRE_FALSE(tok.ok());
    CHECK(tok.err().code == errc::bad_format);
    CHECK_THAT(tok.err().message, Catch::Contains("is not valid JSON"));
  }
}

TEST_CASE("structural errors name the field", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j.erase("model");
  require_error(j, errc::bad_format, {"missing field 'model'"});
  require_error(json::array(), errc::bad_format, {"expected an object"});

  j = tiny_tokenizer_json();
  j["model"].erase("merges");
  require_error(j, errc::bad_format, {"'merges'"});

  j = tiny_tokenizer_json();
  j["model"]["vocab"] = json::array();
  require_error(j, errc::bad_format, {"model.vocab", "array"});

  j = tiny_tokenizer_json();
  j["model"]["vocab"]["he"] = "256";
  require_error(j, errc::bad_format, {"model.vocab['he']", "integer"});

  j = tiny_tokenizer_json();
  j["model"]["vocab"]["he"] = -4;
  require_error(j, errc::bad_format, {"model.vocab['he']", "-4"});

  j = tiny_tokenizer_json();
  j["model"]["vocab"]["he"] = 257;
  require_error(j, errc::bad_format, {"share id 257"});

  j = tiny_tokenizer_json();
  j["added_tokens"] = json::object();
  require_error(j, errc::bad_format, {"added_tokens", "array"});

  j = tiny_tokenizer_json();
  j["added_tokens"][1].erase("content");
  require_error(j, errc::bad_format, {"added_tokens[1]", "'content'"});

  j = tiny_tokenizer_json();
  j["added_tokens"][0]["special"] = "yes";
  require_error(j, errc::bad_format, {"added_tokens[0].special", "boolean"});
}

TEST_CASE("bad merges name the merge and the token", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j["model"]["merges"][3] = "hell q";
  require_error(j, errc::bad_format, {"model.merges[3]", "'hellq'"});

  j = tiny_tokenizer_json();
  j["model"]["merges"][1] = "zz l";
  require_error(j, errc::bad_format, {"model.merges[1]", "'zz'", "not in model.vocab"});

  j = tiny_tokenizer_json();
  j["model"]["merges"][0] = "h e l";
  require_error(j, errc::bad_format, {"model.merges[0]", "one space"});

  j = tiny_tokenizer_json();
  j["model"]["merges"][2] = 7;
  require_error(j, errc::bad_format, {"model.merges[2]", "number"});

  j = tiny_tokenizer_json();
  j["model"]["vocab"].erase("\xC4\xA0");
  require_error(j, errc::bad_format, {"0x20", "256 byte tokens"});
}

TEST_CASE("the newer [left, right] merge form loads the same", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  json pairs = json::array();
  for (const auto& m : j["model"]["merges"]) {
    const auto s = m.get<std::string>();
    pairs.push_back(json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)}));
  }
  j["model"]["merges"] = pairs;
  auto tok = load_json(j);
  REQUIRE(tok.ok());
  CHECK(tok->encode("hello world") == std::vector<int32_t>{259, 262, 108, 100});
}

TEST_CASE("unsupported tokenizer types are named", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  require_error(j, errc::unsupported, {"model.type", "WordPiece"});

  j = tiny_tokenizer_json();
  j["model"]["type"] = "Unigram";
  require_error(j, errc::unsupported, {"model.type", "Unigram"});

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  require_error(j, errc::unsupported, {"pre_tokenizer.type", "Whitespace"});

  j = tiny_tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Dropped";
  require_error(j, errc::unsupported, {"pre_tokenizer.pretokenizers[0].behavior", "Dropped"});

  j = tiny_tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(bad";
  require_error(j, errc::bad_format, {"pre_tokenizer.pretokenizers[0].pattern.Regex", "(bad"});

  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  require_error(j, errc::unsupported, {"normalizer.type", "Lowercase"});

  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "WordPiece"}};
  require_error(j, errc::unsupported, {"decoder.type", "WordPiece"});

  j = tiny_tokenizer_json();
  j.erase("decoder");
  require_error(j, errc::unsupported, {"decoder"});

  j = tiny_tokenizer_json();
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  require_error(j, errc::unsupported, {"post_processor.type", "RobertaProcessing"});

  j = tiny_tokenizer_json();
  j["model"]["dropout"] = 0.1;
  require_error(j, errc::unsupported, {"model.dropout"});

  j = tiny_tokenizer_json();
  j["model"]["continuing_subword_prefix"] = "##";
  require_error(j, errc::unsupported, {"model.continuing_subword_prefix", "##"});
}

TEST_CASE("fields brigade cannot honour are refused by name", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j["truncation"] = {{"max_length", 512}};
  require_error(j, errc::unsupported, {"truncation"});

  j = tiny_tokenizer_json();
  j["padding"] = {{"strategy", "BatchLongest"}};
  require_error(j, errc::unsupported, {"padding"});

  // ByteLevel maps bytes inside brigade's BPE model, so nothing may come after it.
  j = tiny_tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"].push_back(
      {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Isolated"}});
  require_error(j, errc::unsupported, {"pre_tokenizer.pretokenizers[2].type", "ByteLevel"});

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
  require_error(j, errc::bad_format, {"pre_tokenizer.replacement", "one character"});

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "sometimes"}};
  require_error(j, errc::unsupported, {"pre_tokenizer.prepend_scheme", "sometimes"});

  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}};
  require_error(j, errc::bad_format, {"decoder", "'stop'"});

  j = tiny_tokenizer_json();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"Sequence", {{"id", "B"}}}}})}};
  require_error(j, errc::unsupported, {"post_processor.single[0].Sequence.id", "B"});

  j = tiny_tokenizer_json();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}}})},
                         {"special_tokens", json::object()}};
  require_error(j, errc::bad_format, {"post_processor.single[0].SpecialToken.id", "<s>"});

  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(x"}}}, {"content", ""}};
  require_error(j, errc::bad_format, {"normalizer.pattern.Regex", "(x"});
}

TEST_CASE("a normalizer Sequence and a null normalizer both load", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  CHECK(load_json(j).ok());
  j["normalizer"] = nullptr;
  auto tok = load_json(j);
  REQUIRE(tok.ok());
  // Without NFC the decomposed form stays: "e" then the two bytes of U+0301.
  CHECK(tok->encode("e\xCC\x81") == std::vector<int32_t>{101, 0xCC, 0x81});
}

TEST_CASE("tokenizer_config.json errors name the field", "[tokenizer_json]") {
  auto tok = load_json(tiny_tokenizer_json(), json{{"eos_token", "<|missing|>"}});
  REQUIRE_FALSE(tok.ok());
  CHECK_THAT(tok.err().message, Catch::Contains("eos_token '<|missing|>'"));
  tok = load_json(tiny_tokenizer_json(), json{{"bos_token", 5}});
  REQUIRE_FALSE(tok.ok());
  CHECK_THAT(tok.err().message, Catch::Contains("bos_token"));
  tok = load_json(tiny_tokenizer_json(), json::array());
  REQUIRE_FALSE(tok.ok());
  CHECK_THAT(tok.err().message, Catch::Contains("tokenizer_config.json"));
}

TEST_CASE("added tokens honour lstrip, rstrip, single_word and normalized", "[tokenizer_json]") {
  json j = tiny_tokenizer_json();
  j["added_tokens"].push_back({{"id", 303},
                               {"content", "<mask>"},
                               {"lstrip", true},
                               {"rstrip", true},
                               {"special", true},
                               {"normalized", false}});
  j["added_tokens"].push_back({{"id", 304},
                               {"content", "cat"},
                               {"single_word", true},
                               {"special", false},
                               {"normalized", false}});
  j["added_tokens"].push_back(
      {{"id", 305}, {"content", "\xC3\xA9"}, {"special", false}, {"normalized", true}});
  auto tok = load_json(j);
  REQUIRE(tok.ok());
  using ids = std::vector<int32_t>;
  // The whitespace on both sides of <mask> is swallowed.
  CHECK(tok->encode("a \t<mask>  b") == ids{97, 303, 98});
  // "cat" alone is the token; inside a word it is plain text.
  CHECK(tok->encode("cat") == ids{304});
  CHECK(tok->encode("a cat.") == ids{97, 32, 304, 46});
  CHECK(tok->encode("cats") == ids{99, 97, 116, 115});
  // A normalized token matches the decomposed form once NFC has composed it.
  CHECK(tok->encode("e\xCC\x81") == ids{305});
}

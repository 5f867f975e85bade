// The generated tokenizer: deterministic, exactly vocab_size ids, and usable.
#include <catch2/catch.hpp>

#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "model/tokenizer_builder.hpp"
#include "model/tokenizer_corpus.hpp"
#include "tests/model/tokenizer_fixture.hpp"
#include "tests/support/text.hpp"

namespace {

using namespace brigade::model;

tokenizer build(const tokenizer_spec& spec) {
  const std::string dir = testing::scratch_dir("builder");
  const auto written = write_byte_level_tokenizer(dir, spec);
  INFO((written.ok() ? std::string() : written.err().describe()));
  REQUIRE(written.ok());
  auto tok = tokenizer::load(dir);
  INFO((tok.ok() ? std::string() : tok.err().describe()));
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

}  // namespace

TEST_CASE("the builder writes the same bytes every time", "[tokenizer_builder]") {
  tokenizer_spec spec;
  spec.vocab_size = 700;
  const std::string a = testing::scratch_dir("builder-a");
  const std::string b = testing::scratch_dir("builder-b");
  REQUIRE(write_byte_level_tokenizer(a, spec).ok());
  REQUIRE(write_byte_level_tokenizer(b, spec).ok());
  for (const char* name : {"/tokenizer.json", "/tokenizer_config.json"}) {
    const std::string first = brigade::testing::read_text(a + name);
    CHECK(first.size() > 100);
    CHECK(first == brigade::testing::read_text(b + name));
  }
}

TEST_CASE("the builder's vocabulary has exactly vocab_size ids", "[tokenizer_builder]") {
  for (const char* family : {"qwen3_moe", "mixtral", "olmoe"}) {
    for (int32_t vocab : {260, 300, 1024, 4096}) {
      tokenizer_spec spec;
      spec.model_type = family;
      spec.vocab_size = vocab;
      INFO(family << " vocab " << vocab);
      const tokenizer tok = build(spec);
      CHECK(tok.size() == vocab);
      // Every id decodes to something: no holes in the id space.
      for (int32_t id = 0; id < vocab; ++id)
        CHECK_FALSE(tok.decode({id}).empty());
    }
  }
}

TEST_CASE("the builder's special tokens follow the family", "[tokenizer_builder]") {
  tokenizer_spec spec;
  const tokenizer qwen = build(spec);
  REQUIRE(qwen.eos_id().has_value());
  CHECK(qwen.eos_id() == qwen.token_id("<|im_end|>"));
  CHECK_FALSE(qwen.bos_id().has_value());
  const std::string prompt =
      render_chat(chat_format::chatml, {{"user", "Hello there"}}, /*add_generation_prompt=*/true);
  const auto ids = qwen.encode(prompt);
  CHECK(ids.front() == qwen.token_id("<|im_start|>"));
  CHECK(qwen.is_special(ids.front()));
  CHECK(qwen.decode(ids) == prompt);

  spec.model_type = "mixtral";
  const tokenizer mixtral = build(spec);
  CHECK(mixtral.bos_id() == mixtral.token_id("<s>"));
  CHECK(mixtral.eos_id() == mixtral.token_id("</s>"));

  spec.model_type = "olmoe";
  const tokenizer olmoe = build(spec);
  CHECK(olmoe.eos_id() == olmoe.token_id("<|endoftext|>"));
}

TEST_CASE("the builder's merges compress its corpus and round-trip", "[tokenizer_builder]") {
  tokenizer_spec spec;
  spec.vocab_size = 1024;
  const tokenizer tok = build(spec);
  const std::string corpus(tokenizer_corpus());
  const auto ids = tok.encode(corpus);
  CHECK(ids.size() * 3 < corpus.size());  // Well under one token per byte.
  CHECK(tok.decode(ids) == corpus);
}

TEST_CASE("the builder rejects a vocabulary too small for its tokens", "[tokenizer_builder]") {
  tokenizer_spec spec;
  spec.vocab_size = 259;  // 256 bytes + 3 special tokens leaves no room for a merge.
  const auto s = write_byte_level_tokenizer(testing::scratch_dir("builder-small"), spec);
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().code == brigade::errc::invalid_argument);
  CHECK_THAT(s.err().message, Catch::Contains("vocab_size 259"));
}

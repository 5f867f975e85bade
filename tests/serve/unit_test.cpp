// The server's parts without a network: SSE framing, stop strings, API keys and request parsing.
#include <catch2/catch.hpp>

#include "serve/auth.hpp"
#include "serve/openai_request.hpp"
#include "serve/sse.hpp"
#include "serve/stop_matcher.hpp"
#include "serve_fixture.hpp"

using namespace brigade::serve;
using namespace brigade::serve::testing;

TEST_CASE("sse_event frames one payload per data line and the reader undoes it", "[serve]") {
  REQUIRE(sse_event("{\"a\":1}") == "data: {\"a\":1}\n\n");
  REQUIRE(sse_event("x\ny") == "data: x\ndata: y\n\n");
  REQUIRE(sse_done() == "data: [DONE]\n\n");

  const std::string stream = sse_event("one") + ": a comment\n\n" + sse_event("two\nlines") +
                             "event: ignored\r\ndata:three\r\n\r\n" + sse_done();
  // Fed in every split of two pieces, the events come out the same.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    sse_reader reader;
    std::vector<std::string> events;
    REQUIRE(reader.feed(stream.substr(0, cut), events));
    REQUIRE(reader.feed(stream.substr(cut), events));
    REQUIRE(events == std::vector<std::string>{"one", "two\nlines", "three", "[DONE]"});
    REQUIRE_FALSE(reader.partial());
  }
}

TEST_CASE("sse_reader refuses an event over its size bound", "[serve]") {
  sse_reader reader(16);
  std::vector<std::string> events;
  REQUIRE_FALSE(reader.feed("data: " + std::string(64, 'x'), events));
  REQUIRE(reader.failed());
}

TEST_CASE("stop_matcher holds back a possible match and cuts at the first one", "[serve]") {
  stop_matcher m({"END", "xyz"});
  auto a = m.push("hello E");
  REQUIRE(a.text == "hello ");  // "E" may start "END".
  REQUIRE_FALSE(a.matched);
  auto b = m.push("N");
  REQUIRE(b.text.empty());
  auto c = m.push("Dless");
  REQUIRE(c.matched);
  REQUIRE(c.text.empty());

  stop_matcher n({"END"});
  REQUIRE(n.push("EN").text.empty());
  REQUIRE(n.push("x").text == "ENx");  // Not a match after all: released.
  REQUIRE(n.push("ab").text == "ab");
  REQUIRE(n.push("E").text.empty());
  REQUIRE(n.finish() == "E");

  stop_matcher none({});
  REQUIRE(none.push("anything").text == "anything");
}

TEST_CASE("stop_matcher finds a match anywhere in the released pieces", "[serve]") {
  // Feeding "abcSTOPdef" in every split finds the match at the same place.
  const std::string text = "abcSTOPdef";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    stop_matcher m({"STOP"});
    std::string out;
    bool matched = false;
    for (const std::string& piece : {text.substr(0, cut), text.substr(cut)}) {
      if (matched) break;
      auto r = m.push(piece);
      out += r.text;
      matched = r.matched;
    }
    REQUIRE(matched);
    REQUIRE(out == "abc");
  }
}

TEST_CASE("api_key_auth takes only Bearer and a configured key, and says which", "[serve]") {
  api_key_auth off;
  REQUIRE_FALSE(off.enabled());
  REQUIRE(off.match("Bearer anything") == nullptr);
  api_key_auth on({{"sk-1", ""}, {"sk-2", "tenant-b"}, {"", "dropped"}});
  REQUIRE(on.enabled());
  REQUIRE(on.match("Bearer sk-1") != nullptr);
  REQUIRE(on.match("Bearer sk-1")->key == "sk-1");
  REQUIRE(on.match("BEARER sk-1")->key == "sk-1");
  REQUIRE(on.match("Bearer sk-2")->cache_salt == "tenant-b");
  REQUIRE(on.match("") == nullptr);
  REQUIRE(on.match("Bearer ") == nullptr);  // The empty key was dropped.
  REQUIRE(on.match("sk-1") == nullptr);
  REQUIRE(on.match("Bearer sk-") == nullptr);
  REQUIRE(on.match("Bearer sk-12") == nullptr);
  REQUIRE(on.match("Basic sk-1") == nullptr);
}

TEST_CASE("parse_request fills OpenAI's defaults and brigade's extensions", "[serve]") {
  const test_model& m = shared_model();
  request_context ctx;
  ctx.info.model_name = "tiny";
  ctx.info.model_type = m.loaded->config.model_type;
  ctx.info.context_tokens = m.loaded->config.max_positions;
  ctx.info.vocab_size = m.loaded->config.vocab_size;
  ctx.tok = m.tok.get();
  ctx.eos_ids = {7};
  ctx.default_seed = 99;

  auto p = parse_request(api_kind::completion, R"({"model": "tiny", "prompt": [1, 2, 3]})", ctx);
  if (auto* e = std::get_if<api_error>(&p)) FAIL("refused: " << e->param << ": " << e->message);
  const parsed_request& c = std::get<parsed_request>(p);
  REQUIRE(c.generation.prompt == std::vector<int32_t>{1, 2, 3});
  REQUIRE(c.generation.max_tokens == 16);
  REQUIRE(c.generation.sampling.temperature == 1.0f);
  REQUIRE(c.generation.sampling.seed == 99);
  REQUIRE(c.generation.stop_ids == std::vector<int32_t>{7});
  REQUIRE(c.generation.scenario == "chat");
  REQUIRE_FALSE(c.stream);

  auto q = parse_request(api_kind::chat,
                         R"({"model": "tiny", "messages": [{"role": "developer", "content":
                             [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                             "ignore_eos": true, "stop_token_ids": [9], "seed": 5, "top_k": 3,
                             "scenario": "agent", "stop": "##"})",
                         ctx);
  if (auto* e = std::get_if<api_error>(&q)) FAIL("refused: " << e->param << ": " << e->message);
  const parsed_request& h = std::get<parsed_request>(q);
  REQUIRE(h.generation.max_tokens ==
          ctx.info.context_tokens - static_cast<int>(h.generation.prompt.size()));
  REQUIRE(h.generation.stop_ids == std::vector<int32_t>{9});
  REQUIRE(h.generation.sampling.seed == 5);
  REQUIRE(h.generation.sampling.top_k == 3);
  REQUIRE(h.generation.scenario == "agent");
  REQUIRE(h.stop_strings == std::vector<std::string>{"##"});
  const std::string rendered = m.tok->decode(h.generation.prompt);
  REQUIRE(rendered.find("system") != std::string::npos);
  REQUIRE(rendered.find("ab") != std::string::npos);
}

TEST_CASE("parse_request reads a list of prompts and bounds it by the longest", "[serve]") {
  const test_model& m = shared_model();
  request_context ctx;
  ctx.info.model_name = "tiny";
  ctx.info.model_type = m.loaded->config.model_type;
  ctx.info.context_tokens = 10;
  ctx.info.vocab_size = m.loaded->config.vocab_size;
  ctx.tok = m.tok.get();

  auto p =
      parse_request(api_kind::completion,
                    R"({"model": "tiny", "prompt": [[1, 2, 3], [4, 5, 6, 7, 8]], "n": 2})", ctx);
  if (auto* e = std::get_if<api_error>(&p)) FAIL("refused: " << e->param << ": " << e->message);
  const parsed_request& c = std::get<parsed_request>(p);
  REQUIRE(c.prompts == std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5, 6, 7, 8}});
  REQUIRE(c.generation.prompt == c.prompts[0]);
  // The default is min(16, room), the room of the longest prompt: 10 - 5.
  REQUIRE(c.generation.max_tokens == 5);

  // One prompt is a list of one: a one-element list of ids is that prompt, not a batch.
  auto one = parse_request(api_kind::completion, R"({"model": "tiny", "prompt": [[4, 5]]})", ctx);
  REQUIRE(std::get<parsed_request>(one).prompts == std::vector<std::vector<int32_t>>{{4, 5}});

  auto too_long =
      parse_request(api_kind::completion,
                    R"({"model": "tiny", "prompt": [[1], [4, 5, 6, 7, 8]], "max_tokens": 6})", ctx);
  REQUIRE(std::get_if<api_error>(&too_long) != nullptr);
  REQUIRE(std::get<api_error>(too_long).param == "max_tokens");
  REQUIRE(std::get<api_error>(too_long).message.find("the longest prompt has 5") !=
          std::string::npos);

  auto empty =
      parse_request(api_kind::completion, R"({"model": "tiny", "prompt": [[1], []]})", ctx);
  REQUIRE(std::get<api_error>(empty).message == "prompt[1] is empty");
}

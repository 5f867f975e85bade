// Every kind of bad request gets its 4xx and an OpenAI error object naming the field at fault,
// and the server keeps answering good requests afterwards.
#include <catch2/catch.hpp>
#include <string>

#include "serve_fixture.hpp"

using namespace brigade::serve;
using namespace brigade::serve::testing;
using nlohmann::json;

namespace {

struct bad_case {
  const char* what;
  const char* method;
  const char* path;
  std::string body;
  int status;
  const char* param;  // nullptr: the error's param is null.
};

std::string completion(const std::string& fields) {
  return R"({"model": "tiny", "prompt": "Hello there")" + fields + "}";
}

std::string chat(const std::string& fields) {
  return R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}])" + fields + "}";
}

std::vector<bad_case> bad_cases() {
  std::string ids = "[";
  for (int i = 0; i < 300; ++i)
    ids += (i ? ",5" : "5");
  ids += "]";
  std::string many_prompts;
  for (int i = 0; i < 65; ++i)
    many_prompts += (i ? ",\"a\"" : "\"a\"");
  return {
      {"malformed JSON", "POST", "/v1/completions", R"({"model": "tiny", "prompt": )", 400,
       nullptr},
      {"number too large for a double", "POST", "/v1/completions",
       completion(R"(, "temperature": 1e999)"), 400, nullptr},
      {"body is not an object", "POST", "/v1/completions", "[1, 2]", 400, nullptr},
      {"missing model", "POST", "/v1/completions", R"({"prompt": "Hi"})", 400, "model"},
      {"model of the wrong type", "POST", "/v1/completions", R"({"model": 7, "prompt": "Hi"})", 400,
       "model"},
      {"unknown model", "POST", "/v1/completions", R"({"model": "gpt-9", "prompt": "Hi"})", 400,
       "model"},
      {"missing prompt", "POST", "/v1/completions", R"({"model": "tiny"})", 400, "prompt"},
      {"prompt of the wrong type", "POST", "/v1/completions", R"({"model": "tiny", "prompt": {}})",
       400, "prompt"},
      {"empty prompt", "POST", "/v1/completions", R"({"model": "tiny", "prompt": ""})", 400,
       "prompt"},
      {"token id outside the vocabulary", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": [1, 99999]})", 400, "prompt"},
      {"an empty prompt in a list", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": ["a", ""]})", 400, "prompt"},
      {"a number among prompts", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": ["a", 5]})", 400, "prompt"},
      {"65 prompts", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": [)" + many_prompts + "]}", 400, "prompt"},
      {"prompts times best_of over 256", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": ["a", "b", "c", "d", "e"], "n": 64})", 400, "prompt"},
      {"prompt longer than the context", "POST", "/v1/completions",
       R"({"model": "tiny", "prompt": )" + ids + "}", 400, "prompt"},
      {"max_tokens zero", "POST", "/v1/completions", completion(R"(, "max_tokens": 0)"), 400,
       "max_tokens"},
      {"max_tokens of the wrong type", "POST", "/v1/completions",
       completion(R"(, "max_tokens": "10")"), 400, "max_tokens"},
      {"max_tokens past the context", "POST", "/v1/completions",
       completion(R"(, "max_tokens": 100000)"), 400, "max_tokens"},
      {"temperature out of range", "POST", "/v1/completions", completion(R"(, "temperature": -1)"),
       400, "temperature"},
      {"temperature of the wrong type", "POST", "/v1/completions",
       completion(R"(, "temperature": "hot")"), 400, "temperature"},
      {"top_p zero", "POST", "/v1/completions", completion(R"(, "top_p": 0)"), 400, "top_p"},
      {"n zero", "POST", "/v1/completions", completion(R"(, "n": 0)"), 400, "n"},
      {"n negative", "POST", "/v1/completions", completion(R"(, "n": -1)"), 400, "n"},
      {"n above 64", "POST", "/v1/completions", completion(R"(, "n": 65)"), 400, "n"},
      {"best_of below n", "POST", "/v1/completions", completion(R"(, "n": 3, "best_of": 2)"), 400,
       "best_of"},
      {"best_of above n streamed", "POST", "/v1/completions",
       completion(R"(, "best_of": 2, "stream": true)"), 400, "best_of"},
      {"best_of on chat", "POST", "/v1/chat/completions", chat(R"(, "best_of": 2)"), 400,
       "best_of"},
      {"max_tokens 0 without echo", "POST", "/v1/completions", completion(R"(, "max_tokens": 0)"),
       400, "max_tokens"},
      {"logprobs above 20", "POST", "/v1/completions", completion(R"(, "logprobs": 21)"), 400,
       "logprobs"},
      {"logprobs as a bool on completions", "POST", "/v1/completions",
       completion(R"(, "logprobs": true)"), 400, "logprobs"},
      {"a logit bias out of range", "POST", "/v1/completions",
       completion(R"(, "logit_bias": {"5": -101})"), 400, "logit_bias.5"},
      {"a logit bias key that is no token id", "POST", "/v1/completions",
       completion(R"(, "logit_bias": {"five": 1})"), 400, "logit_bias.five"},
      {"logit_bias not an object", "POST", "/v1/completions", completion(R"(, "logit_bias": [5])"),
       400, "logit_bias"},
      {"presence_penalty out of range", "POST", "/v1/completions",
       completion(R"(, "presence_penalty": -2.5)"), 400, "presence_penalty"},
      {"repetition_penalty zero", "POST", "/v1/completions",
       completion(R"(, "repetition_penalty": 0)"), 400, "repetition_penalty"},
      {"min_tokens above max_tokens", "POST", "/v1/completions",
       completion(R"(, "max_tokens": 4, "min_tokens": 5)"), 400, "min_tokens"},
      {"tokenize with neither prompt nor messages", "POST", "/tokenize", R"({})", 400, "prompt"},
      {"detokenize an id outside the vocabulary", "POST", "/detokenize", R"({"tokens": [1, -4]})",
       400, "tokens"},
      {"GET on tokenize", "GET", "/tokenize", "", 405, nullptr},
      {"echo of the wrong type", "POST", "/v1/completions", completion(R"(, "echo": 1)"), 400,
       "echo"},
      {"echo on chat", "POST", "/v1/chat/completions", chat(R"(, "echo": true)"), 400, "echo"},
      {"stop of the wrong type", "POST", "/v1/completions", completion(R"(, "stop": 5)"), 400,
       "stop"},
      {"stream of the wrong type", "POST", "/v1/completions", completion(R"(, "stream": "yes")"),
       400, "stream"},
      {"stream_options without stream", "POST", "/v1/completions",
       completion(R"(, "stream_options": {"include_usage": true})"), 400, "stream_options"},
      {"seed of the wrong type", "POST", "/v1/completions", completion(R"(, "seed": 1.5)"), 400,
       "seed"},
      {"scenario of the wrong type", "POST", "/v1/completions", completion(R"(, "scenario": 3)"),
       400, "scenario"},
      {"unknown scenario", "POST", "/v1/completions", completion(R"(, "scenario": "batch")"), 400,
       "scenario"},
      {"cache_salt of the wrong type", "POST", "/v1/completions",
       completion(R"(, "cache_salt": 7)"), 400, "cache_salt"},
      {"cache_salt as a list", "POST", "/v1/chat/completions", chat(R"(, "cache_salt": ["a"])"),
       400, "cache_salt"},
      {"empty cache_salt", "POST", "/v1/chat/completions", chat(R"(, "cache_salt": "")"), 400,
       "cache_salt"},
      {"cache_salt over 256 characters", "POST", "/v1/completions",
       completion(R"(, "cache_salt": ")" + std::string(257, 's') + "\""), 400, "cache_salt"},
      {"missing messages", "POST", "/v1/chat/completions", R"({"model": "tiny"})", 400, "messages"},
      {"empty messages", "POST", "/v1/chat/completions", R"({"model": "tiny", "messages": []})",
       400, "messages"},
      {"unknown role", "POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]})", 400,
       "messages[0].role"},
      {"content of the wrong type", "POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {"chat top_logprobs without logprobs", "POST", "/v1/chat/completions",
       chat(R"(, "top_logprobs": 3)"), 400, "top_logprobs"},
      {"chat top_logprobs above 20", "POST", "/v1/chat/completions",
       chat(R"(, "logprobs": true, "top_logprobs": 25)"), 400, "top_logprobs"},
      {"tools not a list", "POST", "/v1/chat/completions", chat(R"(, "tools": {"f": 1})"), 400,
       "tools"},
      {"a tool without a name", "POST", "/v1/chat/completions",
       chat(R"(, "tools": [{"type": "function", "function": {"description": "d"}}])"), 400,
       "tools[0].function.name"},
      {"a tool of another type", "POST", "/v1/chat/completions",
       chat(R"(, "tools": [{"type": "code_interpreter"}])"), 400, "tools[0]"},
      {"a tool schema that is no object", "POST", "/v1/chat/completions",
       chat(R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}])"),
       400, "tools[0].function.parameters"},
      {"two tools of one name", "POST", "/v1/chat/completions",
       chat(R"(, "tools": [{"type": "function", "function": {"name": "f"}},)"
            R"( {"type": "function", "function": {"name": "f"}}])"),
       400, "tools[1].function.name"},
      {"tool_choice naming no tool", "POST", "/v1/chat/completions",
       chat(R"(, "tools": [{"type": "function", "function": {"name": "f"}}],)"
            R"( "tool_choice": {"type": "function", "function": {"name": "g"}})"),
       400, "tool_choice"},
      {"tool_choice required without tools", "POST", "/v1/chat/completions",
       chat(R"(, "tool_choice": "required")"), 400, "tool_choice"},
      {"an assistant tool call without a function", "POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]})",
       400, "messages[0].tool_calls[0]"},
      {"chat max_completion_tokens negative", "POST", "/v1/chat/completions",
       chat(R"(, "max_completion_tokens": -3)"), 400, "max_completion_tokens"},
      {"GET on a POST route", "GET", "/v1/completions", "", 405, nullptr},
      {"POST on a GET route", "POST", "/v1/models", "{}", 405, nullptr},
      {"unknown path", "GET", "/v2/everything", "", 404, nullptr},
      {"unknown model path", "GET", "/v1/models/gpt-9", "", 404, nullptr},
  };
}

void require_error_object(const std::string& body, const char* param) {
  const json j = parse_json(body);
  INFO("body: " << body);
  REQUIRE(j.contains("error"));
  const json& e = j["error"];
  REQUIRE(e["message"].is_string());
  REQUIRE_FALSE(e["message"].get<std::string>().empty());
  REQUIRE(e["type"].is_string());
  REQUIRE(e.contains("code"));
  REQUIRE(e.contains("param"));
  if (param) {
    REQUIRE(e["param"] == param);
  } else {
    REQUIRE(e["param"].is_null());
  }
}

void require_good_completion(http_client& client) {
  auto r = client.request("POST", "/v1/completions",
                          R"({"model": "tiny", "prompt": "Hello", "max_tokens": 3, "temperature": 0,
                              "ignore_eos": true})");
  REQUIRE(r.ok());
  INFO("body: " << r->body);
  REQUIRE(r->status == 200);
  REQUIRE(parse_json(r->body)["usage"]["completion_tokens"] == 3);
}

}  // namespace

TEST_CASE("each bad request gets its 4xx and an error object naming the field", "[serve]") {
  test_server server;
  auto client = server.client();
  for (const bad_case& c : bad_cases()) {
    INFO("case: " << c.what);
    auto r = client->request(c.method, c.path, c.body);
    REQUIRE(r.ok());
    REQUIRE(r->status == c.status);
    REQUIRE(r->content_type == "application/json");
    require_error_object(r->body, c.param);
    if (c.status == 405) REQUIRE_FALSE(r->header("Allow").empty());
    require_good_completion(*client);
  }
  REQUIRE(server.engine->in_flight() == 0);
}

TEST_CASE("a body over the limit gets 413 and the server answers the next request", "[serve]") {
  server_options o;
  o.max_body_bytes = 4096;
  test_server server(o);
  auto client = server.client();
  const std::string huge = R"({"model": "tiny", "prompt": ")" + std::string(8192, 'a') + "\"}";
  auto r = client->request("POST", "/v1/completions", huge);
  REQUIRE(r.ok());
  REQUIRE(r->status == 413);
  require_error_object(r->body, nullptr);
  auto fresh = server.client();
  require_good_completion(*fresh);
}

TEST_CASE("malformed HTTP gets 400 and the server answers the next request", "[serve]") {
  test_server server;
  auto raw = raw_exchange("127.0.0.1", server.port(), "THIS IS NOT HTTP\r\n\r\n");
  REQUIRE(raw.ok());
  INFO("answer: " << raw.value());
  REQUIRE(raw->rfind("HTTP/1.1 400", 0) == 0);
  REQUIRE(raw->find("\"error\"") != std::string::npos);
  auto client = server.client();
  require_good_completion(*client);
}

TEST_CASE("API keys: 401 without a key or with a wrong one, 200 with a right one", "[serve]") {
  server_options o;
  o.api_keys = {{"key-one", ""}, {"key-two", ""}};
  test_server server(o);
  auto client = server.client();
  const std::string body = R"({"model": "tiny", "prompt": "Hi", "max_tokens": 2})";

  auto none = client->request("POST", "/v1/completions", body);
  REQUIRE(none.ok());
  REQUIRE(none->status == 401);
  REQUIRE(none->header("WWW-Authenticate") == "Bearer");
  require_error_object(none->body, nullptr);

  auto wrong = client->request("POST", "/v1/completions", body, {{"Authorization", "Bearer nope"}});
  REQUIRE(wrong.ok());
  REQUIRE(wrong->status == 401);

  auto models = client->request("GET", "/v1/models", "", {{"Authorization", "Bearer key-one1"}});
  REQUIRE(models.ok());
  REQUIRE(models->status == 401);

  for (const char* key : {"Bearer key-one", "Bearer key-two", "bearer key-two"}) {
    INFO("header: " << key);
    auto ok = client->request("POST", "/v1/completions", body, {{"Authorization", key}});
    REQUIRE(ok.ok());
    REQUIRE(ok->status == 200);
  }
  // Health, readiness and metrics stay open to probes and scrapers.
  for (const char* path : {"/health", "/ready", "/metrics"}) {
    INFO("path: " << path);
    auto r = client->request("GET", path);
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
  }
}

TEST_CASE("a client that sends a whole oversized body before reading still gets its 413",
          "[serve]") {
  // Closing at once with the body unread would reset the connection: the client's write would
  // fail before it read the answer.
  server_options o;
  o.max_body_bytes = 4096;
  test_server server(o);
  const std::string body(16 << 20, 'a');
  auto raw = raw_exchange("127.0.0.1", server.port(),
                          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          "application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
  REQUIRE(raw.ok());
  INFO("answer: " << raw->substr(0, 200));
  REQUIRE(raw->rfind("HTTP/1.1 413", 0) == 0);
  auto client = server.client();
  require_good_completion(*client);
}

TEST_CASE("HEAD is answered as GET without a body, and the next pipelined answer follows",
          "[serve]") {
  test_server server;
  auto raw = raw_exchange("127.0.0.1", server.port(),
                          "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
                          "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  REQUIRE(raw.ok());
  INFO("answer: " << raw.value());
  REQUIRE(raw->rfind("HTTP/1.1 200", 0) == 0);
  const size_t head_end = raw->find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  REQUIRE(raw->compare(head_end + 4, 12, "HTTP/1.1 200") == 0);
  REQUIRE(raw->find("\"status\"") > head_end + 4);
}

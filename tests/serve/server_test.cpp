// The server end to end over a real engine: streaming framing, usage, keep-alive, the admission
// queue, client disconnects, stop strings and the introspection routes.
#include <catch2/catch.hpp>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "serve/sse.hpp"
#include "serve_fixture.hpp"

using namespace brigade;
using namespace brigade::serve;
using namespace brigade::serve::testing;
using nlohmann::json;

namespace {

json post(http_client& client, const std::string& path, const json& body, int status = 200) {
  auto r = client.request("POST", path, body.dump());
  REQUIRE(r.ok());
  INFO("body: " << r->body);
  REQUIRE(r->status == status);
  return parse_json(r->body);
}

// A streamed answer's events, checked for SSE framing on the raw bytes as they came.
struct streamed {
  http_response response;
  std::vector<json> chunks;  // Every event but [DONE], parsed.
  bool done = false;
};

streamed stream(http_client& client, const std::string& path, const json& body) {
  streamed out;
  std::vector<std::string> events;
  auto r = client.stream(path, body.dump(), {}, [&](const std::string& data) {
    events.push_back(data);
    return true;
  });
  REQUIRE(r.ok());
  out.response = r.value();
  INFO("raw stream: " << out.response.body);
  REQUIRE(out.response.status == 200);
  REQUIRE(out.response.content_type == "text/event-stream");
  REQUIRE(out.response.chunked);
  // Framing: only "data: ...\n\n" events, the last one [DONE].
  const std::string& raw = out.response.body;
  REQUIRE(raw.size() >= 2);
  REQUIRE(raw.compare(raw.size() - 2, 2, "\n\n") == 0);
  for (size_t at = 0; at < raw.size();) {
    const size_t end = raw.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string event = raw.substr(at, end - at);
    REQUIRE(event.rfind("data: ", 0) == 0);
    REQUIRE(event.find('\n') == std::string::npos);
    at = end + 2;
  }
  REQUIRE_FALSE(events.empty());
  REQUIRE(events.back() == "[DONE]");
  out.done = true;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    REQUIRE(events[i] != "[DONE]");
    out.chunks.push_back(parse_json(events[i]));
  }
  return out;
}

json completion_body(int max_tokens) {
  return {{"model", model_name},
          {"prompt", "The brigade of experts"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

json chat_body(int max_tokens) {
  return {{"model", model_name},
          {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                    {{"role", "user"}, {"content", "Name three experts."}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

// Waits up to 60 s for `done`; false when it never came true.
template <class Pred>
bool wait_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("a streamed completion has the same text and usage as the whole one", "[serve]") {
  test_server server;
  auto client = server.client();
  const json whole = post(*client, "/v1/completions", completion_body(12));
  REQUIRE(whole["object"] == "text_completion");
  REQUIRE(whole["choices"][0]["finish_reason"] == "length");
  REQUIRE(whole["usage"]["completion_tokens"] == 12);
  REQUIRE(whole["usage"]["prompt_tokens"].get<int>() > 0);
  REQUIRE(whole["usage"]["total_tokens"] == whole["usage"]["prompt_tokens"].get<int>() + 12);
  REQUIRE(whole["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  REQUIRE(whole["usage"]["prompt_cache_hit_tokens"] == 0);
  REQUIRE(whole["usage"]["prompt_cache_miss_tokens"] == whole["usage"]["prompt_tokens"]);

  json body = completion_body(12);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const streamed s = stream(*client, "/v1/completions", body);
  std::string text;
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
    const json& c = s.chunks[i];
    REQUIRE(c["object"] == "text_completion");
    REQUIRE(c["id"] == s.chunks[0]["id"]);
    REQUIRE(c.contains("usage"));
    REQUIRE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
  }
  REQUIRE(s.chunks[s.chunks.size() - 2]["choices"][0]["finish_reason"] == "length");
  const json& usage_chunk = s.chunks.back();
  REQUIRE(usage_chunk["choices"].empty());
  REQUIRE(usage_chunk["usage"] == whole["usage"]);
  REQUIRE(text == whole["choices"][0]["text"].get<std::string>());
}

TEST_CASE("a streamed chat answer opens with the role and matches the whole answer", "[serve]") {
  test_server server;
  auto client = server.client();
  const json whole = post(*client, "/v1/chat/completions", chat_body(10));
  REQUIRE(whole["object"] == "chat.completion");
  REQUIRE(whole["choices"][0]["message"]["role"] == "assistant");
  REQUIRE(whole["usage"]["completion_tokens"] == 10);

  json body = chat_body(10);
  body["stream"] = true;
  const streamed s = stream(*client, "/v1/chat/completions", body);
  REQUIRE(s.chunks.front()["choices"][0]["delta"]["role"] == "assistant");
  std::string content;
  for (const json& c : s.chunks) {
    REQUIRE(c["object"] == "chat.completion.chunk");
    REQUIRE_FALSE(c.contains("usage"));
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  REQUIRE(s.chunks.back()["choices"][0]["finish_reason"] == "length");
  REQUIRE(content == whole["choices"][0]["message"]["content"].get<std::string>());
}

TEST_CASE("keep-alive: one connection serves many requests of both kinds", "[serve]") {
  test_server server;
  auto client = server.client();
  for (int i = 0; i < 3; ++i) {
    post(*client, "/v1/completions", completion_body(2));
    json body = chat_body(2);
    body["stream"] = true;
    stream(*client, "/v1/chat/completions", body);
    REQUIRE(server.http->open_connections() == 1);
  }
}

TEST_CASE("a full admission queue answers 429 and the queued requests still finish", "[serve]") {
  server_options o;
  o.max_queued = 2;
  o.start_service = false;  // Nothing runs, so the queue fills deterministically.
  test_server server(o);
  std::vector<std::future<int>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::async(std::launch::async, [&server] {
      auto client = server.client();
      auto r = client->request("POST", "/v1/completions", completion_body(3).dump());
      return r.ok() ? r->status : -1;
    }));
  }
  REQUIRE(wait_until([&] { return server.engine->in_flight() == 2; }));

  auto client = server.client();
  auto full = client->request("POST", "/v1/completions", completion_body(3).dump());
  REQUIRE(full.ok());
  REQUIRE(full->status == 429);
  const json e = parse_json(full->body)["error"];
  REQUIRE(e["message"].get<std::string>().find("queue") != std::string::npos);

  server.engine->start();
  for (auto& f : queued)
    REQUIRE(f.get() == 200);
  post(*client, "/v1/completions", completion_body(3));
}

TEST_CASE("a client that hangs up mid-stream cancels its request", "[serve]") {
  test_server server;
  server.recorder->set_gate(1);  // The engine waits after 1 token until the cancel arrived.
  auto client = server.client();
  json body = chat_body(200);
  body["stream"] = true;
  // Hang up on the first event: the chat stream opens with the assistant role at once.
  auto r = client->stream("/v1/chat/completions", body.dump(), {},
                          [&](const std::string&) { return false; });
  REQUIRE(r.ok());
  const int64_t cancelled = server.recorder->wait_for_cancel();
  REQUIRE(cancelled > 0);
  server.recorder->open_gate();
  REQUIRE(server.recorder->wait_until_all_ended());
  const auto outcome = server.recorder->outcome_of(cancelled);
  INFO("request " << cancelled << ": " << outcome.tokens << " tokens, finished " << outcome.finished
                  << ", errored " << outcome.errored);
  REQUIRE(outcome.errored);
  REQUIRE(outcome.error_code == errc::cancelled);
  REQUIRE(outcome.tokens < 200);
  REQUIRE(server.engine->in_flight() == 0);
  auto fresh = server.client();
  post(*fresh, "/v1/completions", completion_body(2));
}

TEST_CASE("a client that hangs up before a whole answer cancels its request", "[serve]") {
  test_server server;
  server.recorder->set_gate(2);
  {
    std::thread sender([&] {
      // The request is written and then the connection closed without reading the answer.
      auto raw = raw_exchange("127.0.0.1", server.port(),
                              "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: " +
                                  std::to_string(completion_body(200).dump().size()) + "\r\n\r\n" +
                                  completion_body(200).dump(),
                              0);
      (void)raw;
    });
    sender.join();
  }
  const int64_t cancelled = server.recorder->wait_for_cancel();
  REQUIRE(cancelled > 0);
  server.recorder->open_gate();
  REQUIRE(server.recorder->wait_until_all_ended());
  REQUIRE(server.recorder->outcome_of(cancelled).error_code == errc::cancelled);
}

TEST_CASE("a stop string cuts the text before it, ends with stop and cancels", "[serve]") {
  test_server server;
  auto client = server.client();
  const json whole = post(*client, "/v1/completions", completion_body(40));
  const std::string text = whole["choices"][0]["text"];
  // A stop string from the middle of the greedy text: two ASCII characters after the start.
  size_t at = std::string::npos;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    const auto a = static_cast<unsigned char>(text[i]), b = static_cast<unsigned char>(text[i + 1]);
    if (a < 0x80 && b < 0x80) {
      at = i;
      break;
    }
  }
  INFO("greedy text: " << text);
  REQUIRE(at != std::string::npos);
  const std::string stop = text.substr(at, 2);
  const size_t first = text.find(stop);

  json body = completion_body(40);
  body["stop"] = json::array({"\x01never", stop});
  const json cut = post(*client, "/v1/completions", body);
  REQUIRE(cut["choices"][0]["text"] == text.substr(0, first));
  REQUIRE(cut["choices"][0]["finish_reason"] == "stop");
  REQUIRE(cut["usage"]["completion_tokens"].get<int>() <= 40);

  body["stream"] = true;
  const streamed s = stream(*client, "/v1/completions", body);
  std::string streamed_text;
  for (const json& c : s.chunks)
    streamed_text += c["choices"][0]["text"].get<std::string>();
  REQUIRE(streamed_text == text.substr(0, first));
  REQUIRE(s.chunks.back()["choices"][0]["finish_reason"] == "stop");
  REQUIRE(server.recorder->wait_until_all_ended());
  // Unless the stop string came with the very last token, the request was cancelled early.
  if (cut["usage"]["completion_tokens"].get<int>() < 40) {
    REQUIRE(server.recorder->cancelled().size() >= 1);
  }
}

TEST_CASE("models, health, readiness, actors and metrics answer", "[serve]") {
  test_server server;
  auto client = server.client();
  post(*client, "/v1/completions", completion_body(4));

  auto models = client->request("GET", "/v1/models");
  REQUIRE(models.ok());
  const json m = parse_json(models->body);
  REQUIRE(m["object"] == "list");
  REQUIRE(m["data"][0]["id"] == model_name);
  auto one = client->request("GET", std::string("/v1/models/") + model_name);
  REQUIRE(one.ok());
  REQUIRE(one->status == 200);

  auto health = client->request("GET", "/health");
  REQUIRE(health->status == 200);
  auto ready = client->request("GET", "/ready");
  REQUIRE(ready->status == 200);
  auto actors = client->request("GET", "/v1/actors");
  REQUIRE(actors->status == 200);
  const json a = parse_json(actors->body);
  REQUIRE(a["actors"].is_array());
  REQUIRE(a["actors"][0]["role"] == "engine");

  auto metrics = client->request("GET", "/metrics");
  REQUIRE(metrics->status == 200);
  REQUIRE(metrics->content_type.rfind("text/plain; version=0.0.4", 0) == 0);
  const std::string& text = metrics->body;
  INFO("metrics:\n" << text);
  for (const char* name :
       {"# TYPE brigade_time_to_first_token_seconds histogram",
        "# TYPE brigade_inter_token_latency_seconds histogram",
        "# TYPE brigade_time_per_output_token_seconds histogram",
        "# TYPE brigade_e2e_request_latency_seconds histogram",
        "# TYPE brigade_num_requests_running gauge", "# TYPE brigade_num_requests_waiting gauge",
        "brigade_generation_tokens_total 4", "brigade_prompt_tokens_cached_total 0",
        "brigade_request_success_total{finished_reason=\"length\"} 1",
        "brigade_time_to_first_token_seconds_count 1",
        "brigade_inter_token_latency_seconds_count 3",
        "brigade_http_requests_total{code=\"200\"}"}) {
    INFO("looking for: " << name);
    REQUIRE(text.find(name) != std::string::npos);
  }
  // One prefix for everything.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ", 0) == 0) line = line.substr(line.find(' ', 2) + 1);
    REQUIRE(line.rfind("brigade_", 0) == 0);
  }
}

TEST_CASE("the engine's /v1/status has its queue, steps and speculation counts", "[serve]") {
  for (int speculate : {0, 4}) {
    INFO("speculate " << speculate);
    server_options options;
    options.speculate = speculate;
    test_server server(options);
    auto client = server.client();
    post(*client, "/v1/completions", completion_body(6));
    auto status = client->request("GET", "/v1/status");
    REQUIRE(status.ok());
    REQUIRE(status->status == 200);
    const json s = parse_json(status->body);
    INFO(s.dump());
    REQUIRE(s.is_array());
    REQUIRE(s.size() == 1);
    CHECK(s[0]["role"] == "engine");
    CHECK(s[0]["steps"].get<int64_t>() > 0);
    CHECK(s[0]["queue_depth"] == 0);
    const json& spec = s[0]["detail"]["speculation"];
    CHECK(spec["max_draft"] == speculate);
    CHECK(spec["draft"] == "lookup");
    CHECK(spec["calibration"].size() == 10);
    CHECK(spec["accepted_tokens"].get<int64_t>() <= spec["drafted_tokens"].get<int64_t>());
    if (speculate == 0) CHECK(spec["verify_steps"] == 0);
  }
}

TEST_CASE("a fault while answering one request is a 500 for it alone; the server goes on",
          "[serve]") {
  test_server server;
  auto client = server.client();
  server.recorder->fail_actors_json = true;
  auto failed = client->request("GET", "/v1/actors");
  REQUIRE(failed.ok());
  CHECK(failed->status == 500);
  const json e = parse_json(failed->body)["error"];
  CHECK(e["type"] == "internal_server_error");
  CHECK_THAT(e["message"].get<std::string>(),
             Catch::Contains("GET /v1/actors") && Catch::Contains("injected fault in actors_json"));
  // The same connection, and the server, answer what comes next.
  server.recorder->fail_actors_json = false;
  CHECK(client->request("GET", "/v1/actors")->status == 200);
  CHECK(post(*client, "/v1/completions", completion_body(3))["usage"]["completion_tokens"] == 3);
  auto metrics = client->request("GET", "/metrics");
  CHECK_THAT(metrics->body, Catch::Contains("brigade_http_requests_total{code=\"500\"} 1"));
}

TEST_CASE("past the connection bound, a new connection gets 503", "[serve]") {
  server_options o;
  o.max_connections = 1;
  test_server server(o);
  auto first = server.client();
  post(*first, "/v1/completions", completion_body(1));  // Stays open (keep-alive).
  auto second = server.client();
  auto r = second->request("GET", "/health");
  REQUIRE(r.ok());
  REQUIRE(r->status == 503);
  first->close();
  REQUIRE(wait_until([&] { return server.http->open_connections() == 0; }));
  auto third = server.client();
  REQUIRE(third->request("GET", "/health")->status == 200);
}

TEST_CASE("an HTTP/1.0 client gets its stream unchunked, ended by closing", "[serve]") {
  test_server server;
  json body = completion_body(3);
  body["stream"] = true;
  const std::string text = body.dump();
  auto raw = raw_exchange("127.0.0.1", server.port(),
                          "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                          "Content-Length: " +
                              std::to_string(text.size()) + "\r\n\r\n" + text);
  REQUIRE(raw.ok());
  INFO("answer: " << raw.value());
  REQUIRE(raw->rfind("HTTP/1.0 200", 0) == 0);
  REQUIRE(raw->find("chunked") == std::string::npos);
  const size_t body_at = raw->find("\r\n\r\n");
  REQUIRE(body_at != std::string::npos);
  std::vector<std::string> events;
  sse_reader reader;
  REQUIRE(reader.feed(raw->substr(body_at + 4), events));
  REQUIRE(events.size() >= 3);
  REQUIRE(events.back() == "[DONE]");
}

TEST_CASE("tokenize and detokenize round-trip a prompt and a chat", "[serve]") {
  test_server server;
  auto client = server.client();
  const json ids = post(*client, "/tokenize", json{{"prompt", "Hello there, experts"}});
  REQUIRE(ids["tokens"].is_array());
  REQUIRE(ids["count"] == ids["tokens"].size());
  REQUIRE(ids["max_model_len"].get<int>() > 0);
  const json text = post(*client, "/detokenize", json{{"tokens", ids["tokens"]}});
  CHECK(text["prompt"] == "Hello there, experts");
  // A chat renders through the model's chat format: longer than its content alone, and
  // shorter without the generation prompt.
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const json rendered = post(*client, "/tokenize", json{{"messages", messages}});
  const json bare =
      post(*client, "/tokenize", json{{"messages", messages}, {"add_generation_prompt", false}});
  CHECK(rendered["count"].get<int>() > bare["count"].get<int>());
  CHECK(bare["count"].get<int>() > 1);
}

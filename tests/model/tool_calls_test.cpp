// Tool definitions and calls in each chat format, and the streaming parser of the model's calls.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "model/chat_template.hpp"
#include "model/tool_calls.hpp"

namespace {

using namespace brigade::model;

const tool_definition kWeather = {
    "get_weather", "Current weather.",
    R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"};

const std::string kWeatherJson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Current weather.", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
    R"("required": ["city"]}}})";

// Qwen's Hermes tools block for kWeather, as it ends the system turn.
const std::string kHermesTools =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
    kWeatherJson +
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

chat_message assistant_calling(std::string content, std::vector<std::string> cities) {
  chat_message m{"assistant", std::move(content)};
  for (size_t i = 0; i < cities.size(); ++i) {
    m.tool_calls.push_back(
        {"call_" + std::to_string(i), "get_weather", R"({"city":")" + cities[i] + "\"}"});
  }
  return m;
}

chat_message tool_result(std::string content, std::string id) {
  chat_message m{"tool", std::move(content)};
  m.tool_call_id = std::move(id);
  m.name = "get_weather";
  return m;
}

const std::string kParisCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kRomeCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";

// Events as lines, adjacent content merged: how many pieces content arrives in does not matter.
void describe(const std::vector<tool_parse_event>& events, std::vector<std::string>& lines) {
  for (const tool_parse_event& e : events) {
    if (e.what == tool_parse_event::kind::call) {
      CHECK(e.call.id.empty());
      lines.push_back("call " + e.call.name + " " + e.call.arguments_json);
    } else if (!lines.empty() && lines.back().rfind("content ", 0) == 0) {
      lines.back() += e.text;
    } else {
      lines.push_back("content " + e.text);
    }
  }
}

std::vector<std::string> parse_chunks(chat_format format, const std::vector<std::string>& chunks) {
  tool_call_parser parser(format);
  std::vector<std::string> lines;
  for (const std::string& chunk : chunks)
    describe(parser.push(chunk), lines);
  describe(parser.finish(), lines);
  return lines;
}

std::vector<std::string> parse(chat_format format, const std::string& text) {
  return parse_chunks(format, {text});
}

std::vector<std::string> parse_bytewise(chat_format format, const std::string& text) {
  std::vector<std::string> bytes;
  for (char c : text)
    bytes.emplace_back(1, c);
  return parse_chunks(format, bytes);
}

using lines = std::vector<std::string>;

}  // namespace

TEST_CASE("chatml puts the tools block in the system turn", "[tool_calls]") {
  CHECK(render_chat(chat_format::chatml, {{"system", "Be brief."}, {"user", "Weather?"}}, true,
                    {kWeather}) ==
        "<|im_start|>system\nBe brief.\n\n" + kHermesTools + "<|im_end|>\n" +
            "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat(chat_format::chatml, {{"user", "Weather?"}}, false, {kWeather}) ==
        "<|im_start|>system\n" + kHermesTools + "<|im_end|>\n" +
            "<|im_start|>user\nWeather?<|im_end|>\n");
}

TEST_CASE("chatml leaves out an empty description and reads a missing schema as {}",
          "[tool_calls]") {
  const std::string prompt =
      render_chat(chat_format::chatml, {{"user", "x"}}, false, {{"now", "", ""}});
  CHECK(prompt.find("\n{\"type\": \"function\", \"function\": {\"name\": \"now\", "
                    "\"parameters\": {}}}\n</tools>") != std::string::npos);
}

TEST_CASE("qwen3 writes tool calls and groups tool results in one user turn", "[tool_calls]") {
  const std::vector<chat_message> conversation = {{"user", "Paris and Rome?"},
                                                  assistant_calling("", {"Paris", "Rome"}),
                                                  tool_result("18C", "call_0"),
                                                  tool_result("21C", "call_1"),
                                                  {"assistant", "18C and 21C."},
                                                  {"user", "And Oslo?"},
                                                  assistant_calling("Checking.", {"Oslo"}),
                                                  tool_result("2C", "call_0")};
  const std::string oslo_call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  CHECK(render_chat(chat_format::qwen3, conversation, true) ==
        "<|im_start|>user\nParis and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n" +
            kParisCall + "\n" + kRomeCall +
            "<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n"
            "<tool_response>\n21C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n18C and 21C.<|im_end|>\n"
            "<|im_start|>user\nAnd Oslo?<|im_end|>\n"
            "<|im_start|>assistant\nChecking.\n" +
            oslo_call +
            "<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n2C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST_CASE("qwen3 writes arguments that are not JSON as they are", "[tool_calls]") {
  chat_message m{"assistant", ""};
  m.tool_calls.push_back({"call_0", "f", "not json"});
  CHECK(render_chat(chat_format::qwen3, {m}, false) ==
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": not json}\n"
        "</tool_call><|im_end|>\n");
}

TEST_CASE("mistral_inst lists the tools before the last user turn", "[tool_calls]") {
  const std::vector<chat_message> conversation = {{"system", "Be brief."},
                                                  {"user", "Hi"},
                                                  {"assistant", "Hello."},
                                                  {"user", "Paris and Rome?"},
                                                  assistant_calling("", {"Paris", "Rome"}),
                                                  tool_result("18C", "call_0"),
                                                  tool_result("21C", "call_1")};
  CHECK(render_chat(chat_format::mistral_inst, conversation, true, {kWeather}) ==
        "<s> [INST] Be brief.\n\nHi [/INST] Hello.</s>[AVAILABLE_TOOLS] [" + kWeatherJson +
            "][/AVAILABLE_TOOLS] [INST] Paris and Rome? [/INST]"
            "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]</s>"
            "[TOOL_RESULTS] {\"content\": \"18C\"}[/TOOL_RESULTS]"
            "[TOOL_RESULTS] {\"content\": \"21C\"}[/TOOL_RESULTS]");
  CHECK(render_chat(chat_format::mistral_inst, {{"user", "x"}}, true, {kWeather, kWeather}) ==
        "<s>[AVAILABLE_TOOLS] [" + kWeatherJson + ", " + kWeatherJson +
            "][/AVAILABLE_TOOLS] [INST] x [/INST]");
}

TEST_CASE("tulu uses the Hermes tools block and tags", "[tool_calls]") {
  const std::vector<chat_message> conversation = {{"system", "Be brief."},
                                                  {"user", "Paris?"},
                                                  assistant_calling("", {"Paris"}),
                                                  tool_result("18C", "call_0")};
  CHECK(render_chat(chat_format::tulu, conversation, true, {kWeather}) ==
        "<|system|>\nBe brief.\n\n" + kHermesTools + "\n<|user|>\nParis?\n<|assistant|>\n" +
            kParisCall +
            "<|endoftext|>\n"
            "<|user|>\n<tool_response>\n18C\n</tool_response>\n<|assistant|>\n");
}

TEST_CASE("deepseek_v3 adds the tools to its system prompt", "[tool_calls]") {
  const std::string prompt = render_chat(
      chat_format::deepseek_v3, {{"system", "Be brief."}, {"user", "Weather?"}}, true, {kWeather});
  const std::string head = "<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\n\n";
  CHECK(prompt.substr(0, head.size()) == head);
  CHECK(prompt.find("\n" + kWeatherJson + "\n") != std::string::npos);
  CHECK(prompt.find("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>") !=
        std::string::npos);
  const std::string tail = "<｜User｜>Weather?<｜Assistant｜>";
  CHECK(prompt.substr(prompt.size() - tail.size()) == tail);
}

TEST_CASE("deepseek_v3 writes calls and outputs as its template does, quirks included",
          "[tool_calls]") {
  chat_message paris_and_rome = assistant_calling("", {"Paris", "Rome"});
  paris_and_rome.content_null = true;
  chat_message oslo = assistant_calling("", {"Oslo"});
  oslo.content_null = true;
  const std::vector<chat_message> conversation = {{"user", "Paris and Rome?"},
                                                  paris_and_rome,
                                                  tool_result("18C", "call_0"),
                                                  tool_result("21C", "call_1"),
                                                  {"assistant", "Mild."},
                                                  {"user", "Oslo?"},
                                                  oslo,
                                                  tool_result("2C", "call_0")};
  const std::string paris =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Paris\"}"
      "\n```<｜tool▁call▁end｜>";
  const std::string rome =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Rome\"}"
      "\n```<｜tool▁call▁end｜>";
  const std::string oslo_call =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Oslo\"}"
      "\n```<｜tool▁call▁end｜>";
  // Only the conversation's first call opens the calls; a later turn's first call closes them.
  CHECK(render_chat(chat_format::deepseek_v3, conversation, true) ==
        "<｜begin▁of▁sentence｜><｜User｜>Paris and Rome?<｜Assistant｜><｜tool▁calls▁begin｜>" +
            paris + "\n" + rome + "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>" +
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18C<｜tool▁output▁end｜>\n"
            "<｜tool▁output▁begin｜>21C<｜tool▁output▁end｜><｜tool▁outputs▁end｜>Mild."
            "<｜end▁of▁sentence｜><｜User｜>Oslo?\n" +
            oslo_call + "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>" +
            "\n<｜tool▁output▁begin｜>2C<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
  // With content, an assistant turn is its content: the template writes no calls.
  chat_message with_content = assistant_calling("Checking.", {"Paris"});
  CHECK(render_chat(chat_format::deepseek_v3, {{"user", "x"}, with_content}, false) ==
        "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜>Checking.<｜end▁of▁sentence｜>");
}

TEST_CASE("deepseek_v3 calls are parsed from its tool tokens", "[tool_calls]") {
  const std::string paris =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}"
      "\n```<｜tool▁call▁end｜>";
  const std::string rome =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Rome\"}"
      "\n```<｜tool▁call▁end｜>";
  const std::string both = "<｜tool▁calls▁begin｜>" + paris + "\n" + rome + "<｜tool▁calls▁end｜>";
  const lines calls = {R"(call get_weather {"city":"Paris"})",
                       R"(call get_weather {"city":"Rome"})"};
  CHECK(parse(chat_format::deepseek_v3, both) == calls);
  CHECK(parse_bytewise(chat_format::deepseek_v3, both) == calls);
  CHECK(parse(chat_format::deepseek_v3, "Let me check.\n" + both + "\n") ==
        lines{"content Let me check.", calls[0], calls[1]});
  // The closing tag may be missing at the end of the output.
  CHECK(parse(chat_format::deepseek_v3, "<｜tool▁calls▁begin｜>" + paris) == lines{calls[0]});
  for (const std::string& bad : std::vector<std::string>{
           "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>retrieval<｜tool▁sep｜>f\n```json\n{}\n```"
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
           "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{}"
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
           "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```"
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
           "<｜tool▁calls▁begin｜>" + paris + " and text<｜tool▁calls▁end｜>",
           "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>",
       }) {
    CHECK(parse(chat_format::deepseek_v3, bad) == lines{"content " + bad});
  }
}

TEST_CASE("the parser gives out one call and nothing else", "[tool_calls]") {
  tool_call_parser parser(chat_format::chatml);
  lines out;
  describe(parser.push(kParisCall), out);
  describe(parser.finish(), out);
  CHECK(out == lines{R"(call get_weather {"city":"Paris"})"});
  CHECK(parser.saw_tool_call());
}

TEST_CASE("the parser drops the whitespace between and after two calls", "[tool_calls]") {
  CHECK(parse(chat_format::chatml, kParisCall + "\n" + kRomeCall + "\n\n") ==
        lines{R"(call get_weather {"city":"Paris"})", R"(call get_weather {"city":"Rome"})"});
  CHECK(parse(chat_format::tulu, kParisCall + kRomeCall) ==
        lines{R"(call get_weather {"city":"Paris"})", R"(call get_weather {"city":"Rome"})"});
}

TEST_CASE("content before a call is content without the newline before the tag", "[tool_calls]") {
  CHECK(parse(chat_format::chatml, "Let me check.\n" + kParisCall) ==
        lines{"content Let me check.", R"(call get_weather {"city":"Paris"})"});
  CHECK(parse(chat_format::chatml, kParisCall + "\nDone.") ==
        lines{R"(call get_weather {"city":"Paris"})", "content \nDone."});
}

TEST_CASE("a plain answer passes through unchanged and at once", "[tool_calls]") {
  tool_call_parser parser(chat_format::chatml);
  lines out;
  describe(parser.push("Hello"), out);
  CHECK(out == lines{"content Hello"});
  describe(parser.push(" <tool"), out);
  CHECK(out == lines{"content Hello"});  // " <tool" may begin a call: held back.
  describe(parser.push("bar> a < b\n"), out);
  CHECK(out == lines{"content Hello <toolbar> a < b"});
  describe(parser.finish(), out);
  CHECK(out == lines{"content Hello <toolbar> a < b\n"});
  CHECK_FALSE(parser.saw_tool_call());
}

TEST_CASE("output fed one byte at a time gives the same events", "[tool_calls]") {
  const std::vector<std::pair<chat_format, std::string>> outputs = {
      {chat_format::chatml, "I'll use <tools> and a < b.\n" + kParisCall + "\n" + kRomeCall},
      {chat_format::chatml, kParisCall + "\n<tool_call>{\"name\": 1}</tool_call>\nDone.\n"},
      {chat_format::tulu, "  " + kRomeCall + "\n\nafter <tool_call"},
      {chat_format::mistral_inst,
       "Sure [1]. [TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}]"},
      {chat_format::deepseek_v3,
       "<｜tool▁call▁begin｜> first.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
       "<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜> <｜tool"}};
  for (const auto& [format, text] : outputs) {
    INFO(text);
    const lines whole = parse(format, text);
    CHECK(parse_bytewise(format, text) == whole);
    for (size_t split = 0; split <= text.size(); ++split) {
      INFO("split at byte " << split);
      CHECK(parse_chunks(format, {text.substr(0, split), text.substr(split)}) == whole);
    }
  }
}

TEST_CASE("a malformed call becomes content with its tags", "[tool_calls]") {
  for (const std::string& bad : {
           std::string("<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>"),
           std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
           std::string("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"),
           std::string("<tool_call>{\"name\": \"f\"}</tool_call>"),
           std::string("<tool_call>[\"f\"]</tool_call>"),
           "<tool_call>" + std::string(100000, '[') + "</tool_call>",
           std::string(
               "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"\xff\"}}</tool_call>"),
       }) {
    tool_call_parser parser(chat_format::chatml);
    lines out;
    describe(parser.push("A\n" + bad), out);
    describe(parser.finish(), out);
    CHECK(out == lines{"content A\n" + bad});
    CHECK_FALSE(parser.saw_tool_call());
  }
}

TEST_CASE("a call still open at the end becomes content", "[tool_calls]") {
  const std::string open = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
  CHECK(parse(chat_format::chatml, open) == lines{"content " + open});
  CHECK(parse(chat_format::chatml, kParisCall + "\n" + open) ==
        lines{R"(call get_weather {"city":"Paris"})", "content \n" + open});
  CHECK(parse(chat_format::chatml, "x <tool_ca") == lines{"content x <tool_ca"});
}

TEST_CASE("arguments written as a string holding an object are accepted", "[tool_calls]") {
  CHECK(parse(chat_format::chatml,
              R"(<tool_call>{"name": "f", "arguments": "{\"b\": 1, \"a\": \"x\"}"}</tool_call>)") ==
        lines{R"(call f {"b":1,"a":"x"})"});
  const std::string not_object = R"(<tool_call>{"name": "f", "arguments": "[1]"}</tool_call>)";
  CHECK(parse(chat_format::chatml, not_object) == lines{"content " + not_object});
}

TEST_CASE("mistral calls run from [TOOL_CALLS] to the end of the output", "[tool_calls]") {
  CHECK(parse(chat_format::mistral_inst,
              "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
              "{\"name\": \"f\", \"arguments\": \"{}\", \"id\": \"abcdefghi\"}]\n") ==
        lines{R"(call get_weather {"city":"Paris"})", "call f {}"});
  CHECK(parse(chat_format::mistral_inst,
              "Checking. [TOOL_CALLS][{\"name\": \"f\", "
              "\"arguments\": {}}]") == lines{"content Checking.", "call f {}"});
  const std::string bad = "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}] and more";
  CHECK(parse(chat_format::mistral_inst, bad) == lines{"content " + bad});
  CHECK(parse(chat_format::mistral_inst, "[TOOL_CALLS] []") == lines{"content [TOOL_CALLS] []"});
  CHECK(parse(chat_format::mistral_inst, kParisCall) == lines{"content " + kParisCall});
}

TEST_CASE("output without a call comes back as it was whatever its pieces", "[tool_calls]") {
  const std::vector<std::string> pieces = {"<tool_call>",
                                           "</tool_call>",
                                           "<tool",
                                           "_call",
                                           ">",
                                           "[TOOL_CALLS]",
                                           "{\"name\"",
                                           "\n",
                                           " ",
                                           "x",
                                           "{",
                                           "}",
                                           "<｜tool▁calls▁begin｜>",
                                           "<｜tool▁calls▁end｜>",
                                           "<｜tool"};
  const uint32_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 2000; ++round) {
    const chat_format formats[] = {chat_format::chatml, chat_format::mistral_inst,
                                   chat_format::deepseek_v3};
    const chat_format format = formats[round % 3];
    std::vector<std::string> chunks(rng() % 8);
    std::string text;
    for (std::string& chunk : chunks) {
      chunk = pieces[rng() % pieces.size()];
      text += chunk;
    }
    tool_call_parser parser(format);
    lines out;
    for (const std::string& chunk : chunks)
      describe(parser.push(chunk), out);
    describe(parser.finish(), out);
    if (parser.saw_tool_call()) continue;
    INFO("output " << text);
    CHECK(out == (text.empty() ? lines{} : lines{"content " + text}));
  }
}

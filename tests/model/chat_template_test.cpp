// The chat formats, rendered exactly, and how a model directory's format is chosen. The prompts
// below are what each family's template renders under jinja2 (chat_parity checks many more).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/chat_template.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace brigade::model;
using brigade::result;
using brigade::testing::temp_dir;

const std::vector<chat_message> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "2+2?"}};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The published template of a family whose template tests/model/chat_parity/templates holds.
std::string published_template(const std::string& name) {
  std::ifstream in(std::string(BRIGADE_SOURCE_DIR) + "/tests/model/chat_parity/templates/" + name);
  return nlohmann::json::parse(in).at("chat_template").get<std::string>();
}

std::string render(chat_format format, const std::vector<chat_message>& messages,
                   bool add_generation_prompt) {
  result<std::string> prompt =
      render_chat(default_chat_style(format), messages, add_generation_prompt);
  REQUIRE(prompt.ok());
  return prompt.value();
}

std::string error_of(const result<chat_style>& r) {
  REQUIRE_FALSE(r.ok());
  return r.err().message;
}

}  // namespace

TEST_CASE("model types map to their chat formats", "[chat_template]") {
  CHECK(chat_format_of_model_type("qwen2_moe") == chat_format::chatml);
  CHECK(chat_format_of_model_type("qwen3_moe") == chat_format::qwen3);
  CHECK(chat_format_of_model_type("mixtral") == chat_format::mistral_inst);
  CHECK(chat_format_of_model_type("olmoe") == chat_format::tulu);
  CHECK(chat_format_of_model_type("deepseek_v3") == chat_format::deepseek_v3);
  CHECK_FALSE(chat_format_of_model_type("something_new").has_value());
  CHECK(chat_format_for("something_new") == chat_format::chatml);
}

TEST_CASE("chat format names read back", "[chat_template]") {
  for (chat_format f : {chat_format::chatml, chat_format::qwen3, chat_format::mistral_inst,
                        chat_format::tulu, chat_format::deepseek_v3}) {
    CHECK(parse_chat_format(chat_format_name(f)) == f);
  }
  CHECK(parse_chat_format("mistral") == chat_format::mistral_inst);
  CHECK_FALSE(parse_chat_format("llama3").has_value());
  CHECK(chat_format_names() == "chatml, qwen3, mistral, tulu, deepseek_v3");
}

TEST_CASE("the published templates are recognised, look-alikes are not", "[chat_template]") {
  CHECK(recognise_chat_template(published_template("qwen2-57b-a14b-instruct.json")) ==
        chat_format::chatml);
  CHECK(recognise_chat_template(published_template("mixtral-8x7b-instruct-v0.1.json")) ==
        chat_format::mistral_inst);
  CHECK(recognise_chat_template(published_template("olmoe-1b-7b-0924-instruct.json")) ==
        chat_format::tulu);
  // Markers of the templates the npm packages ship (chat_parity renders the whole ones).
  CHECK(recognise_chat_template("{{'<｜User｜>' + m}}{{'<｜Assistant｜>'}}") ==
        chat_format::deepseek_v3);
  CHECK(recognise_chat_template("'<|im_start|>' '</think>' enable_thinking") == chat_format::qwen3);
  // Mixtral's first template ('[INST] ' without the leading space), Mistral's v3 with tools,
  // DeepSeek-R1's, Qwen2.5's and Zephyr's render differently.
  CHECK_FALSE(recognise_chat_template("{{ '[INST] ' + m + ' [/INST]' }}").has_value());
  CHECK_FALSE(recognise_chat_template("' [INST] ' ' [/INST]' '[AVAILABLE_TOOLS]'").has_value());
  CHECK_FALSE(recognise_chat_template("'<｜User｜>' '<｜Assistant｜>' '</think>'").has_value());
  CHECK_FALSE(recognise_chat_template("<|im_start|> You are Qwen, created by Alibaba Cloud. You "
                                      "are a helpful assistant. {% if tools %}")
                  .has_value());
  CHECK_FALSE(
      recognise_chat_template("'<|user|>\\n' + c + eos_token '<|assistant|>\\n'").has_value());
  CHECK_FALSE(recognise_chat_template("{{ messages }}").has_value());
}

TEST_CASE("a model's chat style comes from its template and tokenizer_config.json",
          "[chat_template]") {
  temp_dir dir("chat-style");
  nlohmann::json config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<B>"}}},
                           {"eos_token", "<E>"},
                           {"chat_template", published_template("olmoe-1b-7b-0924-instruct.json")}};
  write_file(dir.file("tokenizer_config.json"), config.dump());
  auto style = load_chat_style(dir.path());
  REQUIRE(style.ok());
  CHECK(style->format == chat_format::tulu);
  CHECK(style->bos_token == "<B>");
  CHECK(style->eos_token == "<E>");

  // chat_template.jinja comes before tokenizer_config.json's.
  write_file(dir.file("chat_template.jinja"), published_template("qwen2-57b-a14b-instruct.json"));
  CHECK(load_chat_style(dir.path())->format == chat_format::chatml);
  std::filesystem::remove(dir.file("chat_template.jinja"));

  // A list of templates: the "default" one.
  config["chat_template"] = nlohmann::json::array(
      {{{"name", "tool_use"}, {"template", "x"}},
       {{"name", "default"}, {"template", published_template("mixtral-8x7b-instruct-v0.1.json")}}});
  write_file(dir.file("tokenizer_config.json"), config.dump());
  CHECK(load_chat_style(dir.path())->format == chat_format::mistral_inst);
}

TEST_CASE("a template brigade does not know is refused unless a format is named",
          "[chat_template]") {
  temp_dir dir("chat-unknown");
  write_file(dir.file("config.json"), R"({"model_type": "qwen3_moe"})");
  write_file(dir.file("tokenizer_config.json"),
             R"({"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"})");
  const std::string message = error_of(load_chat_style(dir.path()));
  CHECK_THAT(message, Catch::Contains(dir.path()));
  CHECK_THAT(message, Catch::Contains("model_type qwen3_moe"));
  CHECK_THAT(message, Catch::Contains("set chat_format in the manifest"));
  CHECK_THAT(message, Catch::Contains("deepseek_v3"));

  auto named = load_chat_style(dir.path(), chat_format::chatml);
  REQUIRE(named.ok());
  CHECK(named->format == chat_format::chatml);
  CHECK(named->eos_token == "<|im_end|>");
}

TEST_CASE("without a template the model_type decides, and an unknown one is refused",
          "[chat_template]") {
  temp_dir dir("chat-no-template");
  write_file(dir.file("config.json"), R"({"model_type": "mixtral"})");
  auto style = load_chat_style(dir.path());
  REQUIRE(style.ok());
  CHECK(style->format == chat_format::mistral_inst);
  CHECK(style->bos_token == "<s>");  // No tokenizer_config.json: the family's usual tokens.

  write_file(dir.file("tokenizer_config.json"), R"({"bos_token": null, "eos_token": "</s>"})");
  CHECK(load_chat_style(dir.path())->bos_token.empty());

  write_file(dir.file("config.json"), R"({"model_type": "llama"})");
  CHECK_THAT(error_of(load_chat_style(dir.path())),
             Catch::Contains("no chat template") && Catch::Contains("model_type llama"));
  write_file(dir.file("tokenizer_config.json"), "[1, 2]");
  CHECK_THAT(error_of(load_chat_style(dir.path(), chat_format::tulu)),
             Catch::Contains("not a JSON object"));
}

TEST_CASE("chatml is Qwen2's: a default system turn unless the conversation has one",
          "[chat_template]") {
  CHECK(render(chat_format::chatml, kConversation, true) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(render(chat_format::chatml, {{"user", "x"}}, false) ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nx<|im_end|>\n");
  CHECK(render(chat_format::chatml, {}, true) == "<|im_start|>assistant\n");
}

TEST_CASE("qwen3 keeps the reasoning of the current answer only", "[chat_template]") {
  CHECK(render(chat_format::qwen3, kConversation, true) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n");
  // An earlier answer loses its <think> block; the last one shows it, an empty one if none.
  const std::vector<chat_message> history = {{"user", "Hi"},
                                             {"assistant", "<think>\nhmm\n</think>\n\nHello."},
                                             {"user", "Again"},
                                             {"assistant", "<think>ok</think>Hello again."}};
  CHECK(render(chat_format::qwen3, history, false) ==
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\nAgain<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nok\n</think>\n\nHello again.<|im_end|>\n");
  chat_message answer{"assistant", "Plain."};
  CHECK(render(chat_format::qwen3, {{"user", "Hi"}, answer}, false) ==
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nPlain.<|im_end|>\n");
  answer.reasoning_content = "given apart";
  CHECK(render(chat_format::qwen3, {{"user", "Hi"}, answer}, false) ==
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\ngiven apart\n</think>\n\nPlain.<|im_end|>\n");
  CHECK_FALSE(render_chat(default_chat_style(chat_format::qwen3), {}, true).ok());
}

TEST_CASE("mistral_inst opens the first user turn with the system prompt", "[chat_template]") {
  CHECK(render(chat_format::mistral_inst, kConversation, true) ==
        "<s> [INST] Be brief.\n\nHi [/INST] Hello.</s> [INST] 2+2? [/INST]");
  CHECK(render(chat_format::mistral_inst, {{"user", "x"}}, false) == "<s> [INST] x [/INST]");
  CHECK(render(chat_format::mistral_inst, {{"system", "Only this."}}, true) == "<s>");
}

TEST_CASE("mistral_inst refuses what its template refuses", "[chat_template]") {
  const chat_style style = default_chat_style(chat_format::mistral_inst);
  CHECK_FALSE(render_chat(style, {}, true).ok());
  CHECK_FALSE(render_chat(style, {{"assistant", "first"}}, true).ok());
  CHECK_FALSE(render_chat(style, {{"user", "a"}, {"user", "b"}}, true).ok());
  auto late_system = render_chat(style, {{"user", "a"}, {"assistant", "b"}, {"system", "c"}}, true);
  REQUIRE_FALSE(late_system.ok());
  CHECK_THAT(late_system.err().message, Catch::Contains("messages[2]"));
}

TEST_CASE("tulu writes bos, and no newline after the last answer", "[chat_template]") {
  chat_style style = default_chat_style(chat_format::tulu);
  style.bos_token = "<|endoftext|>";
  CHECK(render_chat(style, kConversation, true).value() ==
        "<|endoftext|><|system|>\nBe brief.\n"
        "<|user|>\nHi\n"
        "<|assistant|>\nHello.<|endoftext|>\n"
        "<|user|>\n2+2?\n"
        "<|assistant|>\n");
  CHECK(render_chat(style, {{"user", "Hi"}, {"assistant", "Hello."}}, false).value() ==
        "<|endoftext|><|user|>\nHi\n<|assistant|>\nHello.<|endoftext|>");
  CHECK(render_chat(style, {}, true).value() == "<|endoftext|>");
}

TEST_CASE("deepseek_v3 puts every system message first", "[chat_template]") {
  std::vector<chat_message> conversation = kConversation;
  conversation.push_back({"system", "And kind."});
  CHECK(render(chat_format::deepseek_v3, conversation, true) ==
        "<｜begin▁of▁sentence｜>Be brief.\n\nAnd kind.<｜User｜>Hi<｜Assistant｜>Hello."
        "<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>");
  CHECK(render(chat_format::deepseek_v3, {{"user", "x"}}, false) ==
        "<｜begin▁of▁sentence｜><｜User｜>x");
  CHECK(render(chat_format::deepseek_v3, {}, true) == "<｜begin▁of▁sentence｜><｜Assistant｜>");
}

TEST_CASE("an OpenAI conversation reads as the API reads it", "[chat_template]") {
  auto read = parse_chat_conversation(R"({"messages": [
      {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "strict": true}}]})");
  REQUIRE(read.ok());
  const std::vector<chat_message>& m = read->messages;
  REQUIRE(m.size() == 4);
  CHECK(m[0].role == "system");
  CHECK(m[0].content == "ab");
  CHECK(m[2].content_null);
  CHECK(m[2].reasoning_content == "r");
  REQUIRE(m[2].tool_calls.size() == 1);
  CHECK(m[2].tool_calls[0].arguments_json == R"({"city":"Paris"})");
  CHECK(m[3].tool_call_id == "c1");
  REQUIRE(read->tools.size() == 1);
  CHECK(read->tools[0].json_text ==
        R"({"type":"function","function":{"name":"get_weather","strict":true}})");

  CHECK(parse_chat_conversation(R"([{"role": "user", "content": "x"}])").ok());
  CHECK_THAT(parse_chat_conversation(R"([{"role": "robot"}])").err().message,
             Catch::Contains("messages[0].role"));
  CHECK_THAT(parse_chat_conversation(R"([{"role": "user", "content": 5}])").err().message,
             Catch::Contains("messages[0].content"));
  CHECK_THAT(parse_chat_conversation(R"({"messages": [], "tools": [{}]})").err().message,
             Catch::Contains("tools[0]"));
  CHECK_FALSE(parse_chat_conversation("not json").ok());
}

TEST_CASE("render_chat_json renders a file's conversation for a model directory",
          "[chat_template]") {
  temp_dir dir("chat-json");
  write_file(dir.file("config.json"), R"({"model_type": "qwen3_moe"})");
  write_file(dir.file("tokenizer_config.json"), R"({"eos_token": "<|im_end|>"})");
  const std::string conversation = R"([{"role": "user", "content": "Hi"}])";
  CHECK(render_chat_json(dir.path(), conversation, true).value() ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat_json(dir.path(), conversation, false, chat_format::deepseek_v3).value() ==
        "<｜begin▁of▁sentence｜><｜User｜>Hi");
  CHECK_FALSE(render_chat_json(dir.path(), "[{}]", true).ok());
}

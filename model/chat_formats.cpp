#include "model/chat_formats.hpp"

#include <nlohmann/json.hpp>
#include <string_view>

namespace brigade::model::chat_formats {
namespace {

// Ordered, so that schemas and arguments keep the order their authors gave them.
using json = nlohmann::ordered_json;

constexpr const char* kHermesToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr const char* kHermesToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
constexpr const char* kQwenDefaultSystem = "You are a helpful assistant.";
constexpr std::string_view kThinkBegin = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

json parse_quietly(const std::string& text) {
  return json::parse(text, nullptr, false);
}

void append_tojson(const json& value, std::string& out) {
  if (value.is_object() || value.is_array()) {
    const bool object = value.is_object();
    out += object ? '{' : '[';
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (it != value.begin()) out += ", ";
      if (object) out += json_string(it.key()) + ": ";
      append_tojson(it.value(), out);
    }
    out += object ? '}' : ']';
    return;
  }
  out += value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string tojson(const json& value) {
  std::string out;
  append_tojson(value, out);
  return out;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string lstrip_newlines(const std::string& text) {
  const size_t first = text.find_first_not_of('\n');
  return first == std::string::npos ? std::string() : text.substr(first);
}

std::string rstrip_newlines(const std::string& text) {
  const size_t last = text.find_last_not_of('\n');
  return last == std::string::npos ? std::string() : text.substr(0, last + 1);
}

std::string strip_newlines(const std::string& text) {
  return lstrip_newlines(rstrip_newlines(text));
}

// Arguments are written as the templates' tojson writes the object a client's JSON text parses
// to; text that is not JSON is written as it is, as Qwen3's template does with a string.
std::string arguments_text(const tool_call& call) {
  json arguments = parse_quietly(call.arguments_json);
  return arguments.is_discarded() ? call.arguments_json : tojson(arguments);
}

// The system turn's text when tools are given: the first message's, if a system one, then the
// Hermes tools block.
std::string hermes_system(const std::vector<chat_message>& messages,
                          const std::vector<tool_definition>& tools) {
  std::string out;
  if (!messages.empty() && messages[0].role == "system") out = messages[0].content + "\n\n";
  out += kHermesToolsHead;
  for (const tool_definition& tool : tools)
    out += "\n" + tool_json(tool);
  out += kHermesToolsTail;
  return out;
}

std::string hermes_call(const tool_call& call) {
  return "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + arguments_text(call) +
         "}\n</tool_call>";
}

// One <tool_call> block per call, each on a new line; the first one too after text.
std::string hermes_call_lines(bool after_text, const std::vector<tool_call>& calls) {
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0 || after_text) out += "\n";
    out += hermes_call(calls[i]);
  }
  return out;
}

std::string hermes_calls(const std::string& content, const std::vector<tool_call>& calls) {
  return content + hermes_call_lines(!content.empty(), calls);
}

// The run of "tool" messages from messages[i] on, as <tool_response> blocks; i moves past them.
std::string hermes_responses(const std::vector<chat_message>& messages, size_t& i) {
  std::string out;
  for (; i < messages.size() && messages[i].role == "tool"; ++i) {
    out += "\n<tool_response>\n" + messages[i].content + "\n</tool_response>";
  }
  return out;
}

// Where a Hermes-style format starts rendering messages: past a system message the tools block
// has taken in.
size_t hermes_first_message(const std::vector<chat_message>& messages,
                            const std::vector<tool_definition>& tools) {
  return !tools.empty() && !messages.empty() && messages[0].role == "system" ? 1 : 0;
}

// The last user message that is not a tool response written by hand: the turns after it are the
// current answer's, whose <think> blocks Qwen3's template keeps. The last message if none.
size_t qwen3_last_query(const std::vector<chat_message>& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const chat_message& m = messages[i];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      return i;
    }
  }
  return messages.size() - 1;
}

// An assistant turn in Qwen3's template: reasoning is split out of content at </think> unless
// given apart; only the turns after the last query show it, the last turn always.
std::string qwen3_assistant(const chat_message& m, bool after_query, bool last) {
  std::string content = m.content;
  std::string reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (content.find(kThinkEnd) != std::string::npos) {
    // Python's content.split('</think>')[0] and [-1], then split('<think>')[-1].
    const std::string before = rstrip_newlines(content.substr(0, content.find(kThinkEnd)));
    const size_t open = before.rfind(kThinkBegin);
    reasoning = lstrip_newlines(
        open == std::string::npos ? before : before.substr(open + kThinkBegin.size()));
    content = lstrip_newlines(content.substr(content.rfind(kThinkEnd) + kThinkEnd.size()));
  }
  std::string out = "<|im_start|>assistant\n";
  if (after_query && (last || !reasoning.empty())) {
    out += "<think>\n" + strip_newlines(reasoning) + "\n</think>\n\n" + lstrip_newlines(content);
  } else {
    out += content;
  }
  // The newline before the first call follows content as split, not as written after <think>.
  return out + hermes_call_lines(!content.empty(), m.tool_calls) + "<|im_end|>\n";
}

}  // namespace

std::string json_string(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string tojson_text(const std::string& json_text) {
  json value = parse_quietly(json_text);
  return value.is_discarded() ? json_text : tojson(value);
}

std::string tojson_or_string(const std::string& json_text) {
  json value = parse_quietly(json_text);
  return value.is_discarded() ? json_string(json_text) : tojson(value);
}

std::string tool_json(const tool_definition& tool) {
  if (!tool.json_text.empty()) return tojson_text(tool.json_text);
  json function = json::object();
  function["name"] = tool.name;
  if (!tool.description.empty()) function["description"] = tool.description;
  json parameters = parse_quietly(tool.parameters_json);
  function["parameters"] = parameters.is_discarded() ? json::object() : std::move(parameters);
  json wrapped = json::object();
  wrapped["type"] = "function";
  wrapped["function"] = std::move(function);
  return tojson(wrapped);
}

// Qwen1.5/Qwen2: every turn is <|im_start|>role\n...<|im_end|>\n, after a default system turn
// when the conversation has none. Tools follow Qwen3's template, and tool results go back as a
// user turn.
result<std::string> render_chatml(const chat_input& in) {
  const std::vector<chat_message>& messages = in.messages;
  std::string out;
  if (!in.tools.empty()) {
    out += "<|im_start|>system\n" + hermes_system(messages, in.tools) + "<|im_end|>\n";
  } else if (!messages.empty() && messages[0].role != "system") {
    out += std::string("<|im_start|>system\n") + kQwenDefaultSystem + "<|im_end|>\n";
  }
  size_t i = hermes_first_message(messages, in.tools);
  while (i < messages.size()) {
    const chat_message& m = messages[i];
    if (m.role == "tool") {
      out += "<|im_start|>user" + hermes_responses(messages, i) + "<|im_end|>\n";
      continue;
    }
    const bool calls = m.role == "assistant" && !m.tool_calls.empty();
    out += "<|im_start|>" + m.role + "\n" +
           (calls ? hermes_calls(m.content, m.tool_calls) : m.content) + "<|im_end|>\n";
    ++i;
  }
  if (in.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen3: ChatML; a first system message (or the tools block) opens, other roles but user,
// system, assistant and tool are left out, and runs of tool results share one user turn.
result<std::string> render_qwen3(const chat_input& in) {
  const std::vector<chat_message>& messages = in.messages;
  if (messages.empty()) {
    return error(errc::invalid_argument, "Qwen3's chat template needs at least one message");
  }
  std::string out;
  if (!in.tools.empty()) {
    out += "<|im_start|>system\n" + hermes_system(messages, in.tools) + "<|im_end|>\n";
  } else if (messages[0].role == "system") {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }
  const size_t last_query = qwen3_last_query(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const chat_message& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += qwen3_assistant(m, i > last_query, last);
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (in.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// OLMoE-Instruct (Tulu): bos, then <|role|>\ncontent\n; an answer ends with eos, and a newline
// unless it is the last message. The generation prompt follows the last message, so none comes
// without messages. Tools use the Hermes wording and tags (brigade's choice: see tool_calls.hpp),
// results go back as a user turn.
result<std::string> render_tulu(const chat_input& in) {
  const std::vector<chat_message>& messages = in.messages;
  std::string out = in.style.bos_token;
  if (!in.tools.empty()) out += "<|system|>\n" + hermes_system(messages, in.tools) + "\n";
  size_t i = hermes_first_message(messages, in.tools);
  while (i < messages.size()) {
    const chat_message& m = messages[i];
    if (m.role == "tool") {
      out += "<|user|>" + hermes_responses(messages, i) + "\n";
      continue;
    }
    if (m.role == "assistant") {
      const bool last = i + 1 == messages.size();
      out += "<|assistant|>\n" + hermes_calls(m.content, m.tool_calls) + in.style.eos_token +
             (last ? "" : "\n");
    } else if (m.role == "system" || m.role == "user") {
      out += "<|" + m.role + "|>\n" + m.content + "\n";
    }
    ++i;
  }
  if (in.add_generation_prompt && !messages.empty()) out += "<|assistant|>\n";
  return out;
}

}  // namespace brigade::model::chat_formats

#include "model/chat_template.hpp"

#include <nlohmann/json.hpp>

namespace brigade::model {
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

json parse_quietly(const std::string& text) {
  return json::parse(text, nullptr, false);
}

std::string json_string(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// JSON as the templates' `tojson` filter writes it (Python's json.dumps): ", " between items and
// ": " after keys, keys in their given order, non-ASCII text left as it is.
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

// {"type": "function", "function": {"name", "description", "parameters"}}, as a request sends it.
std::string tool_json(const tool_definition& tool) {
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

// Arguments that are not JSON are written as they are, as Qwen3's template does with a string.
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

// An assistant turn's text: its content, then one <tool_call> block per call, each on a new line.
std::string hermes_calls(const chat_message& m) {
  std::string out = m.content;
  for (const tool_call& call : m.tool_calls) {
    if (!out.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": " + json_string(call.name) +
           ", \"arguments\": " + arguments_text(call) + "}\n</tool_call>";
  }
  return out;
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

// Qwen: every turn is <|im_start|>role\n...<|im_end|>\n. Tool results go back as a user turn.
std::string render_chatml(const std::vector<chat_message>& messages, bool add_generation_prompt,
                          const std::vector<tool_definition>& tools) {
  std::string out;
  if (!tools.empty())
    out += "<|im_start|>system\n" + hermes_system(messages, tools) + "<|im_end|>\n";
  size_t i = hermes_first_message(messages, tools);
  while (i < messages.size()) {
    const chat_message& m = messages[i];
    if (m.role == "tool") {
      out += "<|im_start|>user" + hermes_responses(messages, i) + "<|im_end|>\n";
      continue;
    }
    const bool calls = m.role == "assistant" && !m.tool_calls.empty();
    out += "<|im_start|>" + m.role + "\n" + (calls ? hermes_calls(m) : m.content) + "<|im_end|>\n";
    ++i;
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// [AVAILABLE_TOOLS] [tool, tool][/AVAILABLE_TOOLS], as Mistral's v3 template writes it.
std::string mistral_tools(const std::vector<tool_definition>& tools) {
  std::string out = "[AVAILABLE_TOOLS] [";
  for (size_t i = 0; i < tools.size(); ++i)
    out += (i ? ", " : "") + tool_json(tools[i]);
  return out + "][/AVAILABLE_TOOLS]";
}

// [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]</s>. The callers' ids are left out: the
// v3 format's call ids are nine characters, which OpenAI's ids are not.
std::string mistral_calls(const std::vector<tool_call>& calls) {
  json list = json::array();
  for (const tool_call& call : calls) {
    json entry = json::object();
    entry["name"] = call.name;
    json arguments = parse_quietly(call.arguments_json);
    entry["arguments"] = arguments.is_discarded() ? json(call.arguments_json) : arguments;
    list.push_back(std::move(entry));
  }
  return "[TOOL_CALLS] " + tojson(list) + "</s>";
}

// Mixtral-Instruct: [INST] ... [/INST] around each user turn, each answer closed by </s>. The
// format has no system role, so a system message is prepended to the next user turn. Tools are
// described right before the last [INST], as Mistral's template does.
std::string render_mistral(const std::vector<chat_message>& messages,
                           const std::vector<tool_definition>& tools) {
  std::string out = "<s>";
  size_t tools_at = out.size();
  std::string system;
  for (const chat_message& m : messages) {
    if (m.role == "system") {
      system += m.content + "\n\n";
    } else if (m.role == "assistant") {
      out += m.tool_calls.empty() ? " " + m.content + "</s>" : mistral_calls(m.tool_calls);
    } else if (m.role == "tool") {
      out += "[TOOL_RESULTS] {\"content\": " + json_string(m.content) + "}[/TOOL_RESULTS]";
    } else {
      tools_at = out.size();
      out += "[INST] " + system + m.content + " [/INST]";
      system.clear();
    }
  }
  if (!system.empty()) {
    system.resize(system.size() - 2);  // A trailing system message still reaches the model.
    tools_at = out.size();
    out += "[INST] " + system + " [/INST]";
  }
  if (!tools.empty()) out.insert(tools_at, mistral_tools(tools));
  // An assistant turn always opens after [/INST], so no generation prompt needs adding.
  return out;
}

// OLMoE-Instruct (Tulu): <|role|>\ncontent\n, each answer closed by the eos token. Tools use the
// Hermes wording and tags (brigade's choice: see tool_calls.hpp), results go back as a user turn.
std::string render_tulu(const std::vector<chat_message>& messages, bool add_generation_prompt,
                        const std::vector<tool_definition>& tools) {
  std::string out;
  if (!tools.empty()) out += "<|system|>\n" + hermes_system(messages, tools) + "\n";
  size_t i = hermes_first_message(messages, tools);
  while (i < messages.size()) {
    const chat_message& m = messages[i];
    if (m.role == "tool") {
      out += "<|user|>" + hermes_responses(messages, i) + "\n";
      continue;
    }
    if (m.role == "assistant") {
      out += "<|assistant|>\n" + (m.tool_calls.empty() ? m.content : hermes_calls(m)) +
             "<|endoftext|>\n";
    } else {
      out += "<|" + m.role + "|>\n" + m.content + "\n";
    }
    ++i;
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

}  // namespace

chat_format chat_format_for(const std::string& model_type) {
  if (model_type == "mixtral" || model_type == "mistral") return chat_format::mistral_inst;
  if (model_type == "olmoe" || model_type == "olmo" || model_type == "olmo2") {
    return chat_format::tulu;
  }
  // Qwen families, and anything unknown: ChatML is the most widely understood format.
  return chat_format::chatml;
}

std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::vector<tool_definition>& tools) {
  switch (format) {
    case chat_format::chatml:
      return render_chatml(messages, add_generation_prompt, tools);
    case chat_format::mistral_inst:
      return render_mistral(messages, tools);
    case chat_format::tulu:
      return render_tulu(messages, add_generation_prompt, tools);
  }
  return render_chatml(messages, add_generation_prompt, tools);
}

}  // namespace brigade::model

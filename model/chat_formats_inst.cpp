// The formats that mark turns with instruction tokens rather than role headers: Mixtral's
// [INST] and DeepSeek-V3's <｜User｜>/<｜Assistant｜>.
#include <string>

#include "model/chat_formats.hpp"

namespace brigade::model::chat_formats {
namespace {

constexpr const char* kMistralAlternate =
    "Mixtral's chat template takes user and assistant turns in turn, from a user turn, after an "
    "optional first system message";
constexpr const char* kMistralRoles =
    "Mixtral's chat template takes a system message only as the first message";

constexpr const char* kDeepseekEos = "<｜end▁of▁sentence｜>";

// A message brigade's tool calling adds to what Mixtral's template takes: a call or a result.
bool tool_traffic(const chat_message& m) {
  return m.role == "tool" || (m.role == "assistant" && !m.tool_calls.empty());
}

// What Mixtral's template refuses: after the optional system message, user and assistant turns
// that do not alternate from user, or any other role. Tool traffic is left out of the count.
status check_mistral_roles(const std::vector<chat_message>& messages, size_t first) {
  size_t turn = 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const chat_message& m = messages[i];
    if (tool_traffic(m)) continue;
    const std::string at = "messages[" + std::to_string(i) + "]: ";
    if ((m.role == "user") != (turn % 2 == 0)) {
      return error(errc::invalid_argument, at + kMistralAlternate);
    }
    if (m.role != "user" && m.role != "assistant") {
      return error(errc::invalid_argument, at + kMistralRoles);
    }
    ++turn;
  }
  return ok_status();
}

// [AVAILABLE_TOOLS] [tool, tool][/AVAILABLE_TOOLS], as Mistral's v3 template writes it.
std::string mistral_tools(const std::vector<tool_definition>& tools) {
  std::string out = "[AVAILABLE_TOOLS] [";
  for (size_t i = 0; i < tools.size(); ++i)
    out += (i ? ", " : "") + tool_json(tools[i]);
  return out + "][/AVAILABLE_TOOLS]";
}

// [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] then eos. The callers' ids are left out:
// the v3 format's call ids are nine characters, which OpenAI's ids are not. Arguments that are
// not JSON are written as a string.
std::string mistral_calls(const std::vector<tool_call>& calls, const std::string& eos) {
  std::string out = "[TOOL_CALLS] [";
  for (size_t i = 0; i < calls.size(); ++i) {
    out += std::string(i ? ", " : "") + "{\"name\": " + json_string(calls[i].name) +
           ", \"arguments\": " + tojson_or_string(calls[i].arguments_json) + "}";
  }
  return out + "]" + eos;
}

size_t last_user_message(const std::vector<chat_message>& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user") return i;
  }
  return messages.size();
}

// One call as DeepSeek-V3's template writes it, from <｜tool▁call▁begin｜> to its end tag.
std::string deepseek_call(const tool_call& call) {
  return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + call.name + "\n```json\n" +
         call.arguments_json + "\n```<｜tool▁call▁end｜>";
}

// The tools section brigade adds to DeepSeek-V3's system prompt (its template has none): the
// functions as JSON, then the call syntax of its template.
std::string deepseek_tools(const std::vector<tool_definition>& tools) {
  std::string out = "## Tools\n\nYou may call one or more of these functions, each given as JSON:";
  for (const tool_definition& tool : tools)
    out += "\n" + tool_json(tool);
  return out +
         "\n\nTo call functions, answer with:\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
         "function<｜tool▁sep｜>FUNCTION_NAME\n```json\n{\"argument\": \"value\"}\n```"
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>\nwith one <｜tool▁call▁begin｜>..."
         "<｜tool▁call▁end｜> per call, each after a newline but the first.";
}

// Where DeepSeek-V3's template is in the conversation, carried from message to message.
struct deepseek_state {
  bool calls_opened = false;  ///< Its is_first: set by the first call, never cleared.
  bool in_outputs = false;    ///< Its is_tool: tool outputs are open.
  bool first_output = true;   ///< Its is_output_first: never set again.
};

// An assistant turn with null content: its calls. As in the template, only the conversation's
// first call opens <｜Assistant｜><｜tool▁calls▁begin｜>, and only the calls after it close the
// calls and the turn.
void deepseek_calls(const chat_message& m, deepseek_state& s, std::string& out) {
  s.in_outputs = false;
  for (const tool_call& call : m.tool_calls) {
    if (!s.calls_opened) {
      out += "<｜Assistant｜><｜tool▁calls▁begin｜>" + deepseek_call(call);
      s.calls_opened = true;
    } else {
      out += "\n" + deepseek_call(call) + "<｜tool▁calls▁end｜>" + kDeepseekEos;
    }
  }
}

void deepseek_message(const chat_message& m, deepseek_state& s, std::string& out) {
  if (m.role == "user") {
    s.in_outputs = false;
    out += "<｜User｜>" + m.content;
  } else if (m.role == "assistant" && m.content_null) {
    deepseek_calls(m, s, out);
  } else if (m.role == "assistant") {
    out += (s.in_outputs ? "<｜tool▁outputs▁end｜>" : "<｜Assistant｜>") + m.content + kDeepseekEos;
    s.in_outputs = false;
  } else if (m.role == "tool") {
    s.in_outputs = true;
    out += s.first_output ? "<｜tool▁outputs▁begin｜>" : "\n";
    out += "<｜tool▁output▁begin｜>" + m.content + "<｜tool▁output▁end｜>";
    s.first_output = false;
  }
}

}  // namespace

// Mixtral-8x7B-Instruct: bos, then " [INST] user [/INST]" and " answer</s>"; a first system
// message opens the first user turn. The template never adds a generation prompt: every user
// turn ends where the answer starts. Tools (brigade's, in Mistral's v3 syntax) come right before
// the last user turn.
result<std::string> render_mistral(const chat_input& in) {
  const std::vector<chat_message>& messages = in.messages;
  if (messages.empty()) {
    return error(errc::invalid_argument, "Mixtral's chat template needs at least one message");
  }
  const bool has_system = messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  if (status roles = check_mistral_roles(messages, first); !roles) return roles.err();
  const size_t last_user = last_user_message(messages);
  std::string out = in.style.bos_token;
  for (size_t i = first; i < messages.size(); ++i) {
    const chat_message& m = messages[i];
    if (m.role == "user") {
      if (i == last_user && !in.tools.empty()) out += mistral_tools(in.tools);
      out += " [INST] " + (i == first && has_system ? messages[0].content + "\n\n" : "") +
             m.content + " [/INST]";
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      out += mistral_calls(m.tool_calls, in.style.eos_token);
    } else if (m.role == "assistant") {
      out += " " + m.content + in.style.eos_token;
    } else {
      out += "[TOOL_RESULTS] {\"content\": " + json_string(m.content) + "}[/TOOL_RESULTS]";
    }
  }
  return out;
}

// DeepSeek-V3: bos and every system message (apart by a blank line), then <｜User｜>content and
// <｜Assistant｜>answer<｜end▁of▁sentence｜>; calls and tool outputs in its tool tokens. Quirks of
// the template kept for parity: an assistant turn with content writes no calls, and see
// deepseek_calls. The generation prompt is left out while tool outputs are open.
result<std::string> render_deepseek_v3(const chat_input& in) {
  std::string system;
  bool first_system = true;
  for (const chat_message& m : in.messages) {
    if (m.role != "system") continue;
    system += (first_system ? "" : "\n\n") + m.content;
    first_system = false;
  }
  if (!in.tools.empty()) system += (system.empty() ? "" : "\n\n") + deepseek_tools(in.tools);
  std::string out = in.style.bos_token + system;
  deepseek_state state;
  for (const chat_message& m : in.messages)
    deepseek_message(m, state, out);
  if (state.in_outputs) out += "<｜tool▁outputs▁end｜>";
  if (in.add_generation_prompt && !state.in_outputs) out += "<｜Assistant｜>";
  return out;
}

}  // namespace brigade::model::chat_formats

// OpenAI tool calling, the model-format half: the tool and call records that chat messages carry,
// and a streaming parser that splits a model's output into content and tool calls.
//
// Each chat format writes calls its own way:
//   chatml, qwen3, tulu  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one per
//                        call (the Hermes style of Qwen2.5 and Qwen3).
//   mistral_inst         [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] up to the end of
//                        the output (Mistral's v3 tool format).
//   deepseek_v3          <｜tool▁calls▁begin｜> then, per call, <｜tool▁call▁begin｜>function
//                        <｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>, the calls
//                        apart by a newline, then <｜tool▁calls▁end｜> (which may be missing at
//                        the end of the output).
// The templates of Qwen2-MoE, OLMoE and Mixtral-8x7B have no tool calling of their own, nor
// DeepSeek-V3's a way to list the tools: there brigade writes them its own way (chat_template.hpp),
// choosing the convention the model is likeliest to follow.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace brigade::model {

// Defined in model/chat_template.hpp, which includes this header for the records below.
enum class chat_format;

/// A function the model may call, as a request's "tools" entry describes it.
struct tool_definition {
  std::string name;                    ///< The function's name.
  std::string description;             ///< What it does; left out of the prompt when empty.
  std::string parameters_json = "{}";  ///< JSON text of its JSON Schema; "{}" if absent.
  /// The whole "tools" entry as the request gave it, JSON text with its keys in their order:
  /// templates that list tools write it as it is. Empty: written from the fields above.
  std::string json_text{};
};

/// A call of a function, made by the model or replayed from an earlier assistant turn.
struct tool_call {
  std::string id;              ///< The caller's id for the call ("call_..."); unused in prompts.
  std::string name;            ///< The function called.
  std::string arguments_json;  ///< JSON text of an object: the call's arguments.
};

/// One piece of a model's output: text to show as content, or one complete tool call.
struct tool_parse_event {
  enum class kind { content, call };
  kind what = kind::content;  ///< Which of the two fields below holds the event.
  std::string text;           ///< The content, when what is content.
  tool_call call;             ///< The call (id left empty for the caller), when what is call.
};

/// Splits streamed output into content and tool calls. Text that might begin a call marker is held
/// back until it is decided, so content is never shown and then taken back. A call whose JSON is
/// malformed, or that is never closed, is given back as content, markers included. Whitespace
/// directly before a call, between calls and after the last one is dropped, so an answer made only
/// of calls has no content. Nothing here throws on any input.
class tool_call_parser {
 public:
  explicit tool_call_parser(chat_format format);

  /// The events that `text`, appended to the output so far, completes.
  std::vector<tool_parse_event> push(std::string_view text);

  /// The events left once the output has ended; the parser must not be pushed to afterwards.
  std::vector<tool_parse_event> finish();

  /// Whether any valid tool call has been given out.
  bool saw_tool_call() const { return saw_tool_call_; }

 private:
  void drain(bool final, std::vector<tool_parse_event>& out);
  bool drain_outside(bool final, std::vector<tool_parse_event>& out);
  bool drain_inside(bool final, std::vector<tool_parse_event>& out);
  void emit_content(std::string_view text, std::vector<tool_parse_event>& out);
  void emit_calls(std::vector<tool_call> calls, std::vector<tool_parse_event>& out);

  chat_format format_;         ///< Whose call syntax the output is in.
  std::string_view open_tag_;  ///< "<tool_call>", "[TOOL_CALLS]" or "<｜tool▁calls▁begin｜>".
  std::string_view close_tag_;  ///< Where the calls end; empty: they run to the end.
  std::string buffer_;          ///< Output not yet given out, from the last decided point.
  std::string held_space_;      ///< Whitespace that is content only if more content follows.
  bool inside_ = false;         ///< Whether buffer_ holds a call's body, its open tag consumed.
  bool last_was_call_ = false;  ///< Whether a call came after the last content given out.
  bool saw_tool_call_ = false;
};

}  // namespace brigade::model

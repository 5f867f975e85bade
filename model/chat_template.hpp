// The chat formats of the supported model families, and how a model directory's format is chosen.
//
// Each format renders a conversation as the family's published chat template does under Hugging
// Face's apply_chat_template (jinja2 with trim_blocks and lstrip_blocks): tests/model/chat_parity
// checks it against jinja2 on the real templates. docs/chat_formats.md lists what each format
// follows, and the few places where brigade goes beyond its template (tools where the template
// has none).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "model/tool_calls.hpp"

namespace brigade::model {

struct chat_message {
  std::string role;                     ///< "system", "user", "assistant" or "tool".
  std::string content;                  ///< Plain text.
  std::vector<tool_call> tool_calls{};  ///< The calls an assistant turn made, in order.
  std::string tool_call_id{};           ///< For a "tool" message: the call it answers.
  std::string name{};                   ///< For a "tool" message: the function, if given.
  /// Whether content was null or absent. deepseek_v3's template writes an assistant turn's calls
  /// only then; the other formats read null as "".
  bool content_null = false;
  /// An assistant turn's "reasoning_content", if the client sent it back: qwen3 writes it as the
  /// turn's <think> block where its template does, instead of splitting it out of content.
  std::optional<std::string> reasoning_content{};
};

enum class chat_format {
  chatml,        ///< Qwen1.5-MoE, Qwen2-MoE: ChatML with a default system turn.
  mistral_inst,  ///< Mixtral-8x7B-Instruct: <s> [INST] user [/INST] assistant</s>
  tulu,          ///< OLMoE-Instruct: <|user|>\ncontent\n<|assistant|>\n
  qwen3,         ///< Qwen3: ChatML, with <think> blocks on the turns after the last query.
  deepseek_v3,   ///< DeepSeek-V3: <｜User｜>content<｜Assistant｜>
};

/// A format and the special tokens its template writes (tokenizer_config.json's).
struct chat_style {
  chat_format format = chat_format::chatml;
  std::string bos_token;  ///< "" when the model has none.
  std::string eos_token;
};

/// The family's usual bos and eos tokens: what load_chat_style assumes when the model's
/// tokenizer_config.json names none.
chat_style default_chat_style(chat_format format);

/// The chat format of a Hugging Face model_type ("qwen3_moe", "mixtral", ...), if brigade knows
/// the family.
std::optional<chat_format> chat_format_of_model_type(const std::string& model_type);

/// As chat_format_of_model_type, with ChatML for a model_type brigade does not know. Generated
/// tokenizers (tokenizer_builder.hpp) choose their special tokens by it.
chat_format chat_format_for(const std::string& model_type);

/// The name a manifest's chat_format takes: "chatml", "mistral", "tulu", "qwen3", "deepseek_v3".
const char* chat_format_name(chat_format format);
std::optional<chat_format> parse_chat_format(std::string_view name);
/// Every name, comma-separated, for messages.
std::string chat_format_names();

/// The format whose template `template_text` is, recognised by the markers each family's
/// template has (docs/chat_formats.md lists them), or nothing.
std::optional<chat_format> recognise_chat_template(std::string_view template_text);

/// The chat style of the model in `model_dir`, decided at start:
///  1. `named` (a manifest's chat_format), if given, whatever the template says;
///  2. else the chat template (chat_template.jinja, else tokenizer_config.json's chat_template):
///     recognised, or refused with an error naming the model and telling to set chat_format;
///  3. else, with no template, the format of config.json's model_type, or refused likewise.
/// bos and eos come from tokenizer_config.json, else default_chat_style's. A directory with only
/// tokenizer.json and tokenizer_config.json is enough when the latter has a template.
result<chat_style> load_chat_style(const std::string& model_dir,
                                   std::optional<chat_format> named = std::nullopt);

/// The prompt for `messages`; with add_generation_prompt the assistant turn is opened where the
/// template does so (mistral_inst's never does: its user turns end in [/INST]).
///
/// `tools` are described as each family's template does where it has a tools section (qwen3's
/// Hermes "# Tools" block in the system turn). Where the template has none, brigade writes them
/// its own way (tool_calls.hpp says which): chatml and tulu use qwen3's block, mistral_inst
/// puts [AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS] before the last [INST], deepseek_v3 adds a
/// "## Tools" section to its system prompt. Assistant turns with tool_calls and "tool" messages
/// are written in the family's call syntax.
///
/// Fails where the template raises (mistral_inst: roles that do not alternate, a system message
/// past the first) or cannot render (no messages for qwen3 and mistral_inst).
result<std::string> render_chat(const chat_style& style, const std::vector<chat_message>& messages,
                                bool add_generation_prompt,
                                const std::vector<tool_definition>& tools = {});

/// render_chat with the family's usual special tokens (default_chat_style), for callers that
/// know the conversation renders, such as tests: "" where render_chat fails.
std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::vector<tool_definition>& tools = {});

/// An OpenAI chat conversation, as a request's messages and tools give it.
struct chat_conversation {
  std::vector<chat_message> messages;  ///< In order.
  std::vector<tool_definition> tools;  ///< Empty: no tools offered.
};

/// Reads a conversation from JSON text: a list of messages, or an object with "messages" and
/// optionally "tools" (a request body's). Messages are read as /v1/chat/completions reads them:
/// role system, developer (read as system), user, assistant or tool; content a string, null, or a
/// list of {"type": "text", "text"} parts; reasoning_content; assistant tool_calls; tool_call_id.
result<chat_conversation> parse_chat_conversation(std::string_view json_text);

/// `brigade tokenize --chat FILE.json [--add-generation-prompt]`: the prompt text the model in
/// `model_dir` is given for the conversation in `json_text` (see parse_chat_conversation), with
/// the chat style load_chat_style chooses (`named`: a chat_format to use instead). Errors name the
/// model or the message at fault.
result<std::string> render_chat_json(const std::string& model_dir, std::string_view json_text,
                                     bool add_generation_prompt,
                                     std::optional<chat_format> named = std::nullopt);

}  // namespace brigade::model

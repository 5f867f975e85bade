// The renderers behind render_chat (model/chat_template.hpp), one per chat format. Private to the
// tokenizer library: callers use render_chat.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "model/chat_template.hpp"

namespace brigade::model::chat_formats {

/// What a renderer is given; references to the caller's values.
struct chat_input {
  const chat_style& style;
  const std::vector<chat_message>& messages;
  bool add_generation_prompt;
  const std::vector<tool_definition>& tools;
};

/// `text` as a JSON string literal, invalid UTF-8 replaced.
std::string json_string(const std::string& text);

/// JSON as the templates' `tojson` filter writes it (Python's json.dumps as Hugging Face calls
/// it): ", " between items and ": " after keys, keys in their given order, non-ASCII text kept.
/// Text that is not JSON is given back as it is.
std::string tojson_text(const std::string& json_text);
/// As tojson_text, but text that is not JSON is written as a JSON string.
std::string tojson_or_string(const std::string& json_text);

/// One "tools" entry as templates dump it: the request's own text if kept, else built as
/// {"type": "function", "function": {"name", "description", "parameters"}}.
std::string tool_json(const tool_definition& tool);

result<std::string> render_chatml(const chat_input& in);
result<std::string> render_qwen3(const chat_input& in);
result<std::string> render_tulu(const chat_input& in);
result<std::string> render_mistral(const chat_input& in);
result<std::string> render_deepseek_v3(const chat_input& in);

}  // namespace brigade::model::chat_formats

// The chat formats of the supported model families, rendered to a prompt string.
#pragma once

#include <string>
#include <vector>

namespace brigade::model {

struct chat_message {
  std::string role;     ///< "system", "user" or "assistant".
  std::string content;  ///< Plain text.
};

enum class chat_format {
  chatml,        ///< Qwen: <|im_start|>role\ncontent<|im_end|>\n
  mistral_inst,  ///< Mixtral: <s>[INST] user [/INST] assistant</s>
  tulu,          ///< OLMoE: <|user|>\ncontent\n<|assistant|>\n
};

/// The chat format used by a Hugging Face model_type ("qwen3_moe", "mixtral", ...).
chat_format chat_format_for(const std::string& model_type);

/// The prompt for `messages`; with add_generation_prompt the assistant turn is opened.
std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        bool add_generation_prompt);

}  // namespace brigade::model

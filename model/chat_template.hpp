// The chat formats of the supported model families, rendered to a prompt string.
#pragma once

#include <string>
#include <vector>

#include "model/tool_calls.hpp"

namespace brigade::model {

struct chat_message {
  std::string role;                     ///< "system", "user", "assistant" or "tool".
  std::string content;                  ///< Plain text.
  std::vector<tool_call> tool_calls{};  ///< The calls an assistant turn made, in order.
  std::string tool_call_id{};           ///< For a "tool" message: the call it answers.
  std::string name{};                   ///< For a "tool" message: the function, if given.
};

enum class chat_format {
  chatml,        ///< Qwen: <|im_start|>role\ncontent<|im_end|>\n
  mistral_inst,  ///< Mixtral: <s>[INST] user [/INST] assistant</s>
  tulu,          ///< OLMoE: <|user|>\ncontent\n<|assistant|>\n
};

/// The chat format used by a Hugging Face model_type ("qwen3_moe", "mixtral", ...).
chat_format chat_format_for(const std::string& model_type);

/// The prompt for `messages`; with add_generation_prompt the assistant turn is opened.
///
/// `tools` are described the way each family's published template does (see tool_calls.hpp for
/// the call syntax): chatml and tulu put Qwen's Hermes "# Tools" block at the end of the system
/// turn, making one if there is none; mistral_inst puts [AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]
/// right before the last [INST]. Assistant turns with tool_calls and "tool" messages are written
/// in the family's call syntax whether or not tools are given; without them, and without such
/// messages, the prompt is the plain one.
std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::vector<tool_definition>& tools = {});

}  // namespace brigade::model

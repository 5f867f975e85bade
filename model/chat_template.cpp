#include "model/chat_template.hpp"

namespace brigade::model {
namespace {

// Qwen: every turn is <|im_start|>role\n...<|im_end|>\n.
std::string render_chatml(const std::vector<chat_message>& messages, bool add_generation_prompt) {
  std::string out;
  for (const chat_message& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Mixtral-Instruct: [INST] ... [/INST] around each user turn, each answer closed by </s>. The
// format has no system role, so a system message is prepended to the next user turn.
std::string render_mistral(const std::vector<chat_message>& messages) {
  std::string out = "<s>";
  std::string system;
  for (const chat_message& m : messages) {
    if (m.role == "system") {
      system += m.content + "\n\n";
    } else if (m.role == "assistant") {
      out += " " + m.content + "</s>";
    } else {
      out += "[INST] " + system + m.content + " [/INST]";
      system.clear();
    }
  }
  if (!system.empty()) {
    system.resize(system.size() - 2);  // A trailing system message still reaches the model.
    out += "[INST] " + system + " [/INST]";
  }
  // An assistant turn always opens after [/INST], so no generation prompt needs adding.
  return out;
}

// OLMoE-Instruct (Tulu): <|role|>\ncontent\n, each answer closed by the eos token.
std::string render_tulu(const std::vector<chat_message>& messages, bool add_generation_prompt) {
  std::string out;
  for (const chat_message& m : messages) {
    if (m.role == "assistant") {
      out += "<|assistant|>\n" + m.content + "<|endoftext|>\n";
    } else {
      out += "<|" + m.role + "|>\n" + m.content + "\n";
    }
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
                        bool add_generation_prompt) {
  switch (format) {
    case chat_format::chatml:
      return render_chatml(messages, add_generation_prompt);
    case chat_format::mistral_inst:
      return render_mistral(messages);
    case chat_format::tulu:
      return render_tulu(messages, add_generation_prompt);
  }
  return render_chatml(messages, add_generation_prompt);
}

}  // namespace brigade::model

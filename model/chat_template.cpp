#include "model/chat_template.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "model/chat_formats.hpp"

namespace brigade::model {
namespace {

// Ordered, so that tools and arguments keep the order their authors gave them.
using json = nlohmann::ordered_json;

struct named_format {
  chat_format format;
  const char* name;
};

constexpr named_format kFormatNames[] = {{chat_format::chatml, "chatml"},
                                         {chat_format::qwen3, "qwen3"},
                                         {chat_format::mistral_inst, "mistral"},
                                         {chat_format::tulu, "tulu"},
                                         {chat_format::deepseek_v3, "deepseek_v3"}};

// How a family's template is told apart: text it has, and text that marks a different template
// of the same look (a later revision brigade does not render).
struct template_markers {
  chat_format format;
  std::vector<std::string_view> required;
  std::vector<std::string_view> excluded;
};

const std::vector<template_markers>& known_templates() {
  static const std::vector<template_markers> templates = {
      // DeepSeek-R1's template, of the same model_type, opens a <think> block.
      {chat_format::deepseek_v3, {"<｜User｜>", "<｜Assistant｜>"}, {"</think>"}},
      // Qwen3's hybrid template; the 2507 revisions lack enable_thinking.
      {chat_format::qwen3, {"<|im_start|>", "</think>", "enable_thinking"}, {}},
      // Qwen1.5/Qwen2's; Qwen2.5's has tools and names Qwen in its default system turn.
      {chat_format::chatml,
       {"<|im_start|>", "You are a helpful assistant."},
       {"</think>", "You are Qwen", "tools"}},
      // Mixtral-8x7B's with system support; the first revision wrote '[INST] ' without the
      // leading space, and the v3 ones list [AVAILABLE_TOOLS].
      {chat_format::mistral_inst, {" [INST] ", " [/INST]"}, {"[AVAILABLE_TOOLS]"}},
      // Tulu's, which OLMoE-Instruct ships; Zephyr's looks alike but ends every turn with eos.
      {chat_format::tulu, {"<|user|>", "<|assistant|>", "not loop.last"}, {}},
  };
  return templates;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(errc::io_error, "cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// tokenizer_config.json as an object; {} when the file is absent.
result<json> read_tokenizer_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return json::object();
  auto text = read_text(path);
  if (!text) return text.err();
  json config = json::parse(text.value(), nullptr, false);
  if (!config.is_object()) {
    return error(errc::bad_format, path.string() + " is not a JSON object");
  }
  return config;
}

// config.json's model_type, "" when there is none to read.
std::string model_type_of(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "config.json", ec)) return "";
  auto text = read_text(dir / "config.json");
  if (!text) return "";
  const json config = json::parse(text.value(), nullptr, false);
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string()) {
    return "";
  }
  return config["model_type"].get<std::string>();
}

// The template and where it came from: chat_template.jinja, which Hugging Face reads before
// tokenizer_config.json's chat_template (a string, or a list whose "default" entry is used).
// Empty text: the model has none.
result<std::pair<std::string, std::string>> read_template(const std::filesystem::path& dir,
                                                          const json& config) {
  std::error_code ec;
  if (std::filesystem::exists(dir / "chat_template.jinja", ec)) {
    auto text = read_text(dir / "chat_template.jinja");
    if (!text) return text.err();
    return std::make_pair(std::move(text.value()), std::string("chat_template.jinja"));
  }
  const std::string where = "tokenizer_config.json's chat_template";
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::make_pair(std::string(), where);
  if (it->is_string()) return std::make_pair(it->get<std::string>(), where);
  if (it->is_array()) {
    for (const json& entry : *it) {
      if (entry.is_object() && entry.value("name", json()) == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return std::make_pair(entry["template"].get<std::string>(), where + " \"default\"");
      }
    }
  }
  return error(errc::bad_format,
               (dir / "tokenizer_config.json").string() +
                   ": chat_template must be a string or a list holding a \"default\" template");
}

// A special token as tokenizer_config.json gives it: a string, {"content": ...}, or null.
std::optional<std::string> token_text(const json& config, const char* field) {
  auto it = config.find(field);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::string();
}

error bad_field(const std::string& field, const std::string& what) {
  return error(errc::invalid_argument, field + " " + what);
}

// content: a string, null or absent (null is true), or a list of text parts, joined.
status read_content(const json& m, const std::string& field, chat_message& out) {
  auto c = m.find("content");
  out.content_null = c == m.end() || c->is_null();
  if (out.content_null) return ok_status();
  if (c->is_string()) {
    out.content = c->get<std::string>();
    return ok_status();
  }
  if (!c->is_array()) return bad_field(field, "must be a string, null or a list of text parts");
  for (const json& part : *c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return bad_field(field, "may hold only parts {\"type\": \"text\", \"text\": ...}");
    }
    out.content += part["text"].get<std::string>();
  }
  return ok_status();
}

// An assistant turn's calls: [{"id", "type": "function", "function": {"name", "arguments"}}],
// arguments JSON text (kept as it is) or an object.
status read_calls(const json& m, const std::string& field, std::vector<tool_call>& out) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return ok_status();
  if (!it->is_array()) return bad_field(field, "must be a list of calls");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& c = (*it)[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    const json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return bad_field(at, "must be {\"type\": \"function\", \"function\": {\"name\", ...}}");
    }
    tool_call call;
    call.name = (*f)["name"].get<std::string>();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    const json arguments = f->value("arguments", json("{}"));
    call.arguments_json = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
    out.push_back(std::move(call));
  }
  return ok_status();
}

result<chat_message> read_message(const json& m, size_t index) {
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  const std::string at = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return bad_field(at, "must be an object");
  const json role = m.value("role", json());
  if (!role.is_string() || !roles.count(role.get<std::string>())) {
    return bad_field(at + ".role", "must be system, developer, user, assistant or tool");
  }
  chat_message out;
  out.role = role == "developer" ? "system" : role.get<std::string>();
  if (status s = read_content(m, at + ".content", out); !s) return s.err();
  const json reasoning = m.value("reasoning_content", json());
  if (reasoning.is_string()) out.reasoning_content = reasoning.get<std::string>();
  if (out.role == "assistant") {
    if (status s = read_calls(m, at + ".tool_calls", out.tool_calls); !s) return s.err();
  }
  if (out.role == "tool") {
    const json id = m.value("tool_call_id", json()), name = m.value("name", json());
    if (id.is_string()) out.tool_call_id = id.get<std::string>();
    if (name.is_string()) out.name = name.get<std::string>();
  }
  return out;
}

// {"type": "function", "function": {"name", "description", "parameters"}}, kept whole as well.
result<tool_definition> read_tool(const json& t, size_t index) {
  const std::string at = "tools[" + std::to_string(index) + "]";
  const json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
  if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
    return bad_field(at, "must be {\"type\": \"function\", \"function\": {\"name\", ...}}");
  }
  tool_definition tool;
  tool.name = (*f)["name"].get<std::string>();
  const json description = f->value("description", json());
  if (description.is_string()) tool.description = description.get<std::string>();
  const json parameters = f->value("parameters", json());
  if (parameters.is_object()) tool.parameters_json = parameters.dump();
  tool.json_text = t.dump();
  return tool;
}

std::string describe_model(const std::string& model_dir, const std::string& model_type) {
  return "'" + model_dir + "'" + (model_type.empty() ? "" : " (model_type " + model_type + ")");
}

result<chat_format> choose_format(const std::filesystem::path& dir, const std::string& model_dir,
                                  const json& config) {
  const std::string model_type = model_type_of(dir);
  const std::string model = "model " + describe_model(model_dir, model_type) + ": ";
  const std::string what_to_set = "; set chat_format in the manifest to the format it follows (" +
                                  chat_format_names() + "; docs/chat_formats.md)";
  auto found = read_template(dir, config);
  if (!found) return found.err();
  const auto& [text, where] = found.value();
  if (!text.empty()) {
    if (auto format = recognise_chat_template(text)) return *format;
    return error(errc::unsupported, model + "its chat template (" + where +
                                        ") is not one brigade renders" + what_to_set);
  }
  if (auto format = chat_format_of_model_type(model_type)) return *format;
  return error(errc::unsupported,
               model + "no chat template, and brigade knows no chat format for its model_type" +
                   what_to_set);
}

}  // namespace

chat_style default_chat_style(chat_format format) {
  switch (format) {
    case chat_format::mistral_inst:
      return {format, "<s>", "</s>"};
    case chat_format::tulu:
      return {format, "", "<|endoftext|>"};
    case chat_format::deepseek_v3:
      return {format, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};
    case chat_format::chatml:
    case chat_format::qwen3:
      break;
  }
  return {format, "", "<|im_end|>"};
}

std::optional<chat_format> chat_format_of_model_type(const std::string& model_type) {
  if (model_type == "qwen2_moe" || model_type == "qwen2") return chat_format::chatml;
  if (model_type == "qwen3_moe" || model_type == "qwen3") return chat_format::qwen3;
  if (model_type == "mixtral" || model_type == "mistral") return chat_format::mistral_inst;
  if (model_type == "olmoe" || model_type == "olmo" || model_type == "olmo2") {
    return chat_format::tulu;
  }
  if (model_type == "deepseek_v3") return chat_format::deepseek_v3;
  return std::nullopt;
}

chat_format chat_format_for(const std::string& model_type) {
  return chat_format_of_model_type(model_type).value_or(chat_format::chatml);
}

const char* chat_format_name(chat_format format) {
  for (const named_format& f : kFormatNames) {
    if (f.format == format) return f.name;
  }
  return "unknown";
}

std::optional<chat_format> parse_chat_format(std::string_view name) {
  for (const named_format& f : kFormatNames) {
    if (name == f.name) return f.format;
  }
  return std::nullopt;
}

std::string chat_format_names() {
  std::string out;
  for (const named_format& f : kFormatNames)
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::optional<chat_format> recognise_chat_template(std::string_view template_text) {
  for (const template_markers& t : known_templates()) {
    const auto has = [&](std::string_view part) { return contains(template_text, part); };
    if (std::all_of(t.required.begin(), t.required.end(), has) &&
        std::none_of(t.excluded.begin(), t.excluded.end(), has)) {
      return t.format;
    }
  }
  return std::nullopt;
}

result<chat_style> load_chat_style(const std::string& model_dir, std::optional<chat_format> named) {
  const std::filesystem::path dir(model_dir);
  auto config = read_tokenizer_config(dir);
  if (!config) return config.err();
  chat_format format = chat_format::chatml;
  if (named) {
    format = *named;
  } else {
    auto chosen = choose_format(dir, model_dir, config.value());
    if (!chosen) return chosen.err();
    format = chosen.value();
  }
  chat_style style = default_chat_style(format);
  if (auto bos = token_text(config.value(), "bos_token")) style.bos_token = *bos;
  if (auto eos = token_text(config.value(), "eos_token")) style.eos_token = *eos;
  return style;
}

result<std::string> render_chat(const chat_style& style, const std::vector<chat_message>& messages,
                                bool add_generation_prompt,
                                const std::vector<tool_definition>& tools) {
  const chat_formats::chat_input in{style, messages, add_generation_prompt, tools};
  switch (style.format) {
    case chat_format::chatml:
      return chat_formats::render_chatml(in);
    case chat_format::qwen3:
      return chat_formats::render_qwen3(in);
    case chat_format::mistral_inst:
      return chat_formats::render_mistral(in);
    case chat_format::tulu:
      return chat_formats::render_tulu(in);
    case chat_format::deepseek_v3:
      return chat_formats::render_deepseek_v3(in);
  }
  return error(errc::internal, "unknown chat format");
}

std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        bool add_generation_prompt, const std::vector<tool_definition>& tools) {
  result<std::string> prompt =
      render_chat(default_chat_style(format), messages, add_generation_prompt, tools);
  return prompt ? std::move(prompt.value()) : std::string();
}

result<chat_conversation> parse_chat_conversation(std::string_view json_text) {
  const json body = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (body.is_discarded()) return error(errc::bad_format, "the conversation is not valid JSON");
  const json messages = body.is_object() ? body.value("messages", json()) : body;
  if (!messages.is_array()) {
    return error(errc::invalid_argument,
                 "the conversation must be a list of messages or an object with \"messages\"");
  }
  chat_conversation out;
  for (size_t i = 0; i < messages.size(); ++i) {
    auto message = read_message(messages[i], i);
    if (!message) return message.err();
    out.messages.push_back(std::move(message.value()));
  }
  const json tools = body.is_object() ? body.value("tools", json()) : json();
  if (!tools.is_null() && !tools.is_array()) return bad_field("tools", "must be a list");
  for (size_t i = 0; tools.is_array() && i < tools.size(); ++i) {
    auto tool = read_tool(tools[i], i);
    if (!tool) return tool.err();
    out.tools.push_back(std::move(tool.value()));
  }
  return out;
}

result<std::string> render_chat_json(const std::string& model_dir, std::string_view json_text,
                                     bool add_generation_prompt, std::optional<chat_format> named) {
  auto style = load_chat_style(model_dir, named);
  if (!style) return style.err();
  auto conversation = parse_chat_conversation(json_text);
  if (!conversation) return conversation.err();
  return render_chat(style.value(), conversation->messages, add_generation_prompt,
                     conversation->tools);
}

}  // namespace brigade::model

#include "serve/openai_request.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "serve/auth.hpp"

namespace brigade::serve {
namespace {

// Ordered, so that tool schemas and arguments reach the prompt with their keys in the order the
// client gave them, as the chat templates write them.
using json = nlohmann::ordered_json;

// Reads optional fields of one JSON object; the first bad field is kept as the error. A field
// set to null counts as absent, as in the OpenAI API.
class field_reader {
 public:
  explicit field_reader(const json& body) : body_(body) {}

  std::optional<api_error> error;

  const json* find(const char* name) const {
    auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }

  bool get_bool(const char* name, bool& out) {
    const json* v = find(name);
    if (!v) return true;
    if (!v->is_boolean()) return fail(name, std::string(name) + " must be true or false");
    out = v->get<bool>();
    return true;
  }

  bool get_int(const char* name, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
    const json* v = find(name);
    if (!v) return true;
    if (!v->is_number_integer()) return fail(name, std::string(name) + " must be an integer");
    const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX}
                          ? INT64_MAX
                          : v->get<int64_t>();
    if (x < lo || x > hi) {
      return fail(name, std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "], got " + std::to_string(x));
    }
    out = x;
    return true;
  }

  bool get_number(const char* name, double lo, double hi, bool lo_open, double& out) {
    const json* v = find(name);
    if (!v) return true;
    if (!v->is_number()) return fail(name, std::string(name) + " must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      return fail(name, std::string(name) + " must be in " + (lo_open ? "(" : "[") + num(lo) +
                            ", " + num(hi) + "], got " + num(x));
    }
    out = x;
    return true;
  }

  bool fail(const std::string& param, const std::string& message, const std::string& code = "") {
    if (!error) error = bad_request(param, message, code);
    return false;
  }

 private:
  static std::string num(double x) {
    json j = x;
    return j.dump();
  }
  const json& body_;
};

bool tokens_in_vocab(field_reader& r, const char* param, const std::vector<int32_t>& ids,
                     int vocab) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return r.fail(param, std::string(param) + ": token id " + std::to_string(id) +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  return true;
}

bool int_array(const json& v, std::vector<int32_t>& out) {
  if (!v.is_array()) return false;
  for (const json& e : v) {
    if (!e.is_number_integer()) return false;
    const int64_t x = e.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX) return false;
    out.push_back(static_cast<int32_t>(x));
  }
  return true;
}

// One prompt of a completion: a string or a list of token ids. `param` names it in errors
// ("prompt", or "prompt[i]" in a list of prompts).
bool read_one_prompt(field_reader& r, const json& p, const std::string& param,
                     const request_context& ctx, std::vector<int32_t>& ids) {
  if (p.is_string()) {
    ids = ctx.tok->encode(p.get_ref<const std::string&>());
  } else if (!int_array(p, ids)) {
    return r.fail("prompt", param + " must be a string or a list of token ids");
  }
  if (ids.empty()) return r.fail("prompt", param + " is empty");
  return tokens_in_vocab(r, "prompt", ids, ctx.info.vocab_size);
}

// Completions: a string, a list of token ids, or a list of either (a batch: every prompt gets
// the request's choices, as vLLM and the OpenAI API answer it). `most` bounds the batch (1: one
// prompt only, as /tokenize takes).
bool read_prompts(field_reader& r, const json& body, const request_context& ctx, size_t most,
                  std::vector<std::vector<int32_t>>& prompts) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return r.fail("prompt", "prompt is required");
  const json& p = *it;
  const bool batch = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!batch) {
    prompts.resize(1);
    return read_one_prompt(r, p, "prompt", ctx, prompts[0]);
  }
  if (p.size() > most) {
    return r.fail("prompt", "prompt holds " + std::to_string(p.size()) + " prompts; " +
                                (most == 1 ? std::string("this route takes one: send them one "
                                                         "at a time")
                                           : "at most " + std::to_string(most) +
                                                 " are taken per request: split the list"));
  }
  prompts.resize(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string param = p.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
    if (!read_one_prompt(r, p[i], param, ctx, prompts[i])) return false;
  }
  return true;
}

bool read_prompt(field_reader& r, const json& body, const request_context& ctx,
                 std::vector<int32_t>& ids) {
  std::vector<std::vector<int32_t>> prompts;
  if (!read_prompts(r, body, ctx, 1, prompts)) return false;
  ids = std::move(prompts[0]);
  return true;
}

bool read_content(field_reader& r, const json& m, const std::string& param,
                  model::chat_message& msg) {
  auto c = m.find("content");
  msg.content_null = c == m.end() || c->is_null();
  if (msg.content_null) return true;
  std::string& out = msg.content;
  if (c->is_string()) {
    out = c->get<std::string>();
    return true;
  }
  if (!c->is_array()) return r.fail(param, param + " must be a string or a list of parts");
  for (const json& part : *c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return r.fail(param,
                    param + ": only parts {\"type\": \"text\", \"text\": ...} are supported");
    }
    out += part["text"].get<std::string>();
  }
  return true;
}

int json_depth(const json& j) {
  int deepest = 0;
  if (j.is_object() || j.is_array()) {
    for (const json& e : j)
      deepest = std::max(deepest, json_depth(e));
    return deepest + 1;
  }
  return 0;
}

bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// An assistant turn's earlier calls: [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}].
bool read_message_calls(field_reader& r, const json& m, const std::string& param,
                        std::vector<model::tool_call>& out) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return true;
  const std::string p = param + ".tool_calls";
  if (!it->is_array()) return r.fail(p, p + " must be a list of calls");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& c = (*it)[i];
    const std::string cp = p + "[" + std::to_string(i) + "]";
    const json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return r.fail(cp, cp + " must be {\"type\": \"function\", \"function\": {\"name\", "
                             "\"arguments\"}}");
    }
    model::tool_call call;
    call.name = (*f)["name"].get<std::string>();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    const json* a = f->contains("arguments") ? &(*f)["arguments"] : nullptr;
    if (a && a->is_string()) {
      call.arguments_json = a->get<std::string>();
    } else if (a && a->is_object()) {
      call.arguments_json = a->dump();
    } else {
      call.arguments_json = "{}";
    }
    out.push_back(std::move(call));
  }
  return true;
}

bool read_messages(field_reader& r, const json& body, const request_context& ctx,
                   std::vector<model::chat_message>& messages) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return r.fail("messages", "messages is required");
  if (!it->is_array() || it->empty())
    return r.fail("messages", "messages must be a non-empty list");
  if (it->size() > static_cast<size_t>(max_messages)) {
    return r.fail("messages", "messages holds more than " + std::to_string(max_messages));
  }
  (void)ctx;
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return r.fail(param, param + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !roles.count(role->get<std::string>())) {
      return r.fail(param + ".role",
                    param + ".role must be system, developer, user, assistant or tool");
    }
    model::chat_message msg;
    msg.role = role->get<std::string>() == "developer" ? "system" : role->get<std::string>();
    if (!read_content(r, m, param + ".content", msg)) return false;
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    }
    if (msg.role == "assistant" && !read_message_calls(r, m, param, msg.tool_calls)) return false;
    if (msg.role == "tool") {
      if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
        msg.tool_call_id = m["tool_call_id"].get<std::string>();
      }
      if (m.contains("name") && m["name"].is_string()) msg.name = m["name"].get<std::string>();
    }
    messages.push_back(std::move(msg));
  }
  return true;
}

bool render_messages(field_reader& r, const request_context& ctx,
                     const std::vector<model::chat_message>& messages,
                     const std::vector<model::tool_definition>& tools, bool generation_prompt,
                     const std::string& forced_prefix, std::vector<int32_t>& ids) {
  result<std::string> prompt = model::render_chat(ctx.chat, messages, generation_prompt, tools);
  if (!prompt) return r.fail("messages", prompt.err().message);
  ids = ctx.tok->encode(prompt.value() + forced_prefix);
  if (ids.empty()) return r.fail("messages", "the messages render to an empty prompt");
  return true;
}

bool read_messages(field_reader& r, const json& body, const request_context& ctx,
                   std::vector<int32_t>& ids, bool generation_prompt = true) {
  std::vector<model::chat_message> messages;
  return read_messages(r, body, ctx, messages) &&
         render_messages(r, ctx, messages, {}, generation_prompt, "", ids);
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}].
bool read_tools(field_reader& r, std::vector<model::tool_definition>& tools) {
  const json* v = r.find("tools");
  if (!v) return true;
  if (!v->is_array()) return r.fail("tools", "tools must be a list of functions");
  if (v->size() > static_cast<size_t>(max_tools)) {
    return r.fail("tools", "tools holds more than " + std::to_string(max_tools) + " functions");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      return r.fail(p, p + " must be {\"type\": \"function\", \"function\": {...}}");
    }
    const json& f = t["function"];
    model::tool_definition d;
    if (!f.contains("name") || !f["name"].is_string() ||
        !valid_function_name(f["name"].get<std::string>())) {
      return r.fail(p + ".function.name",
                    p + ".function.name must be 1-64 characters of a-z, A-Z, 0-9, _ - .");
    }
    d.name = f["name"].get<std::string>();
    if (!names.insert(d.name).second) {
      return r.fail(p + ".function.name", "two tools are named '" + d.name + "'");
    }
    if (f.contains("description") && !f["description"].is_null()) {
      if (!f["description"].is_string()) {
        return r.fail(p + ".function.description", p + ".function.description must be a string");
      }
      d.description = f["description"].get<std::string>();
    }
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      const json& schema = f["parameters"];
      if (!schema.is_object()) {
        return r.fail(p + ".function.parameters",
                      p + ".function.parameters must be a JSON Schema object");
      }
      if (json_depth(schema) > max_schema_depth) {
        return r.fail(p + ".function.parameters", p + ".function.parameters nests deeper than " +
                                                      std::to_string(max_schema_depth) + " levels");
      }
      d.parameters_json = schema.dump();
    }
    d.json_text = t.dump();
    tools.push_back(std::move(d));
  }
  return true;
}

// The start of a call in the format's syntax; with a name, up to where the arguments begin.
std::string call_opening(model::chat_format format, const std::string& name) {
  if (format == model::chat_format::deepseek_v3) {
    const std::string call = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>";
    return name.empty() ? call : call + name + "\n```json\n";
  }
  const std::string call =
      format == model::chat_format::mistral_inst ? "[TOOL_CALLS] [" : "<tool_call>\n";
  return name.empty() ? call : call + "{\"name\": " + json(name).dump() + ", \"arguments\": ";
}

// tool_choice: "none" (tools are not offered), "auto" (the default with tools), "required" or
// {"type": "function", "function": {"name"}}: the assistant's turn starts with a call's opening.
bool read_tool_choice(field_reader& r, const request_context& ctx,
                      std::vector<model::tool_definition>& tools, parsed_request& out) {
  const json* v = r.find("tool_choice");
  std::string choice = tools.empty() ? "none" : "auto";
  std::string named;
  if (v && v->is_string()) {
    choice = v->get<std::string>();
    if (choice != "none" && choice != "auto" && choice != "required") {
      return r.fail("tool_choice", "tool_choice must be none, auto, required or a function");
    }
  } else if (v && v->is_object()) {
    const json* f = v->contains("function") ? &(*v)["function"] : nullptr;
    if (v->value("type", json()) != "function" || !f || !f->is_object() || !f->contains("name") ||
        !(*f)["name"].is_string()) {
      return r.fail("tool_choice",
                    "tool_choice must be {\"type\": \"function\", \"function\": {\"name\"}}");
    }
    named = (*f)["name"].get<std::string>();
    choice = "function";
  } else if (v) {
    return r.fail("tool_choice", "tool_choice must be none, auto, required or a function");
  }
  if (choice != "none" && tools.empty()) {
    return r.fail("tool_choice", "tool_choice '" + choice + "' needs tools");
  }
  if (choice == "function" &&
      std::none_of(tools.begin(), tools.end(),
                   [&](const model::tool_definition& t) { return t.name == named; })) {
    return r.fail("tool_choice", "tool_choice names '" + named + "', which is not in tools");
  }
  if (choice == "none") {
    tools.clear();
    return true;
  }
  out.parse_tool_calls = true;
  out.format = ctx.chat.format;
  if (choice == "required") out.forced_prefix = call_opening(ctx.chat.format, "");
  if (choice == "function") out.forced_prefix = call_opening(ctx.chat.format, named);
  return true;
}

bool read_chat_prompt(field_reader& r, const json& body, const request_context& ctx,
                      parsed_request& out) {
  std::vector<model::chat_message> messages;
  std::vector<model::tool_definition> tools;
  // Accepted for clients that send it; every call the model writes is returned.
  bool parallel_tool_calls = true;
  return read_messages(r, body, ctx, messages) && read_tools(r, tools) &&
         read_tool_choice(r, ctx, tools, out) &&
         r.get_bool("parallel_tool_calls", parallel_tool_calls) &&
         render_messages(r, ctx, messages, tools, true, out.forced_prefix, out.generation.prompt);
}

// Fields brigade does not implement are refused by name rather than silently ignored.
bool refuse_unsupported(field_reader& r, api_kind kind) {
  if (const json* v = r.find("suffix"); v && !(v->is_string() && v->get<std::string>().empty())) {
    return r.fail("suffix", "suffix is not supported");
  }
  if (kind == api_kind::chat) {
    if (const json* v = r.find("response_format");
        v && !(v->is_object() && v->value("type", json()) == "text")) {
      return r.fail("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
  }
  return true;
}

// n choices, best_of (completions: generate that many, answer the n likeliest) and echo.
bool read_choices(field_reader& r, api_kind kind, parsed_request& out) {
  std::optional<int64_t> n, best_of;
  if (!r.get_int("n", 1, max_choices, n)) return false;
  out.n = static_cast<int>(n.value_or(1));
  if (kind == api_kind::chat) {
    if (r.find("best_of")) return r.fail("best_of", "best_of is a completions field");
    if (r.find("echo")) return r.fail("echo", "echo is a completions field");
    out.best_of = out.n;
    return true;
  }
  if (!r.get_int("best_of", 1, max_choices, best_of)) return false;
  out.best_of = static_cast<int>(best_of.value_or(out.n));
  if (out.best_of < out.n) {
    return r.fail("best_of", "best_of (" + std::to_string(out.best_of) + ") must be at least n (" +
                                 std::to_string(out.n) + ")");
  }
  if (out.best_of > out.n && out.stream) {
    return r.fail("best_of",
                  "best_of > n cannot be streamed: the best choices are known only "
                  "once every choice ended");
  }
  return r.get_bool("echo", out.echo);
}

// Completions: logprobs K (0-20) asks for the chosen token's and the K likeliest. Chat:
// logprobs true, with top_logprobs K (0-20) alternatives.
bool read_logprobs(field_reader& r, api_kind kind, int& top_logprobs) {
  const int64_t most = model::max_top_logprobs;
  if (kind == api_kind::completion) {
    const json* v = r.find("logprobs");
    if (v && v->is_boolean()) {
      return r.fail("logprobs", "logprobs on completions is a number of alternatives in [0, 20]");
    }
    std::optional<int64_t> k;
    if (!r.get_int("logprobs", 0, most, k)) return false;
    if (r.find("top_logprobs")) {
      return r.fail("top_logprobs", "top_logprobs is a chat field; completions take logprobs: K");
    }
    top_logprobs = k ? static_cast<int>(*k) : -1;
    return true;
  }
  bool wanted = false;
  if (!r.get_bool("logprobs", wanted)) return false;
  std::optional<int64_t> k;
  if (!r.get_int("top_logprobs", 0, most, k)) return false;
  if (k && !wanted) return r.fail("top_logprobs", "top_logprobs needs logprobs: true");
  top_logprobs = wanted ? static_cast<int>(k.value_or(0)) : -1;
  return true;
}

// presence_penalty, frequency_penalty (OpenAI), repetition_penalty and logit_bias (keys are
// token ids as strings).
bool read_penalties(field_reader& r, const request_context& ctx, model::sampling_params& s) {
  double presence = 0.0, frequency = 0.0, repetition = 1.0;
  if (!r.get_number("presence_penalty", -model::max_penalty, model::max_penalty, false, presence) ||
      !r.get_number("frequency_penalty", -model::max_penalty, model::max_penalty, false,
                    frequency) ||
      !r.get_number("repetition_penalty", 0.0, model::max_repetition_penalty, true, repetition)) {
    return false;
  }
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  s.repetition_penalty = static_cast<float>(repetition);
  const json* bias = r.find("logit_bias");
  if (!bias) return true;
  if (!bias->is_object()) {
    return r.fail("logit_bias", "logit_bias must be an object of token id to bias");
  }
  if (bias->size() > static_cast<size_t>(model::max_logit_biases)) {
    return r.fail("logit_bias", "logit_bias holds more than " +
                                    std::to_string(model::max_logit_biases) + " tokens");
  }
  for (const auto& [key, value] : bias->items()) {
    const std::string param = "logit_bias." + key;
    char* end = nullptr;
    errno = 0;
    const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || errno != 0 || id < 0 || id >= ctx.info.vocab_size) {
      return r.fail(param, "logit_bias keys must be token ids in [0, " +
                               std::to_string(ctx.info.vocab_size) + "), got '" + key + "'");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) ||
        std::fabs(value.get<double>()) > model::max_logit_bias) {
      return r.fail(param, "a logit bias must be a number in [-100, 100]");
    }
    s.logit_bias.push_back({static_cast<int32_t>(id), value.get<float>()});
  }
  return true;
}

// min_tokens (vLLM): the stop ids cannot end the answer before this many tokens.
bool read_min_tokens(field_reader& r, int max_tokens, model::sampling_params& s) {
  std::optional<int64_t> min;
  if (!r.get_int("min_tokens", 0, max_tokens, min)) return false;
  s.min_tokens = min ? static_cast<int>(*min) : 0;
  return true;
}

bool read_stop(field_reader& r, std::vector<std::string>& out) {
  const json* v = r.find("stop");
  if (!v) return true;
  std::vector<std::string> all;
  if (v->is_string()) {
    all.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) return r.fail("stop", "stop must be a string or a list of strings");
      all.push_back(s.get<std::string>());
    }
  } else {
    return r.fail("stop", "stop must be a string or a list of strings");
  }
  if (all.size() > static_cast<size_t>(max_stop_strings)) {
    return r.fail("stop", "stop holds more than " + std::to_string(max_stop_strings) + " strings");
  }
  for (auto& s : all) {
    if (s.size() > max_stop_string_bytes) {
      return r.fail("stop", "a stop string is longer than " +
                                std::to_string(max_stop_string_bytes) + " bytes");
    }
    if (!s.empty()) out.push_back(std::move(s));
  }
  return true;
}

bool read_stream(field_reader& r, parsed_request& out) {
  if (!r.get_bool("stream", out.stream)) return false;
  const json* opts = r.find("stream_options");
  if (!opts) return true;
  if (!out.stream) return r.fail("stream_options", "stream_options needs stream: true");
  if (!opts->is_object()) return r.fail("stream_options", "stream_options must be an object");
  field_reader inner(*opts);
  if (!inner.get_bool("include_usage", out.include_usage)) {
    return r.fail("stream_options.include_usage", "stream_options.include_usage must be a bool");
  }
  return true;
}

bool read_sampling(field_reader& r, const request_context& ctx, model::sampling_params& s) {
  double temperature = 1.0, top_p = 1.0;
  std::optional<int64_t> top_k, seed;
  if (!r.get_number("temperature", 0.0, 2.0, false, temperature)) return false;
  if (!r.get_number("top_p", 0.0, 1.0, true, top_p)) return false;
  if (!r.get_int("top_k", -1, INT32_MAX, top_k)) return false;
  if (!r.get_int("seed", INT64_MIN, INT64_MAX, seed)) return false;
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.top_k = top_k && *top_k > 0 ? static_cast<int>(*top_k) : 0;
  s.seed = seed ? static_cast<uint64_t>(*seed) : ctx.default_seed;
  return true;
}

bool read_stop_ids(field_reader& r, const request_context& ctx, std::vector<int32_t>& stop_ids) {
  bool ignore_eos = false;
  if (!r.get_bool("ignore_eos", ignore_eos)) return false;
  if (!ignore_eos) stop_ids = ctx.eos_ids;
  const json* v = r.find("stop_token_ids");
  if (!v) return true;
  std::vector<int32_t> extra;
  if (!int_array(*v, extra)) return r.fail("stop_token_ids", "stop_token_ids must be token ids");
  if (extra.size() > static_cast<size_t>(max_stop_token_ids)) {
    return r.fail("stop_token_ids",
                  "stop_token_ids holds more than " + std::to_string(max_stop_token_ids) + " ids");
  }
  if (!tokens_in_vocab(r, "stop_token_ids", extra, ctx.info.vocab_size)) return false;
  stop_ids.insert(stop_ids.end(), extra.begin(), extra.end());
  return true;
}

bool read_scenario(field_reader& r, const request_context& ctx, std::string& scenario) {
  const json* v = r.find("scenario");
  if (!v) return true;
  const std::string name = v->is_string() ? v->get<std::string>() : std::string();
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
      });
  if (!ok) return r.fail("scenario", "scenario must be a name of [a-z0-9_-], e.g. \"chat\"");
  const auto& known = ctx.info.scenarios;
  if (!known.empty() && std::find(known.begin(), known.end(), name) == known.end()) {
    std::string names;
    for (const auto& k : known)
      names += (names.empty() ? "" : ", ") + k;
    return r.fail("scenario", "unknown scenario '" + name + "'; this server knows " + names);
  }
  scenario = name;
  return true;
}

// cache_salt (vLLM's): a prefix-cache namespace of 1 to max_cache_salt_chars characters.
bool read_cache_salt(field_reader& r, std::string& salt) {
  const json* v = r.find("cache_salt");
  if (!v) return true;
  if (!v->is_string() || !valid_cache_salt(v->get_ref<const std::string&>())) {
    return r.fail("cache_salt", "cache_salt must be a string of 1 to " +
                                    std::to_string(max_cache_salt_chars) + " characters");
  }
  salt = v->get<std::string>();
  return true;
}

// The prompt must leave room in the context for max_tokens (default: 16 for completions, the
// rest of the context for chat, as the OpenAI API does). In a list of prompts, the longest one
// must: `batch` says so in the errors.
bool read_max_tokens(field_reader& r, api_kind kind, const request_context& ctx, int prompt,
                     bool batch, bool echo, int& max_tokens, bool& no_output) {
  const int context = ctx.info.context_tokens;
  const char* prompt_param = kind == api_kind::chat ? "messages" : "prompt";
  const std::string the_prompt = batch ? "the longest prompt" : "the prompt";
  if (prompt >= context) {
    return r.fail(prompt_param,
                  (batch ? the_prompt : std::string(prompt_param)) + " has " +
                      std::to_string(prompt) + " tokens; this model's context is " +
                      std::to_string(context) + " tokens",
                  "context_length_exceeded");
  }
  const char* name = kind == api_kind::chat && r.find("max_completion_tokens")
                         ? "max_completion_tokens"
                         : "max_tokens";
  std::optional<int64_t> asked;
  if (!r.get_int(name, 0, INT32_MAX, asked)) return false;
  if (asked && *asked == 0) {
    // Scoring a prompt (evaluation harnesses): one token is generated, and dropped.
    if (!echo) return r.fail(name, std::string(name) + " 0 needs echo: true (to score the prompt)");
    no_output = true;
    max_tokens = 1;
    return true;
  }
  const int room = context - prompt;
  if (asked && *asked > room) {
    return r.fail(name,
                  "this model's context is " + std::to_string(context) + " tokens; " + the_prompt +
                      " has " + std::to_string(prompt) + ", so " + name + " may be at most " +
                      std::to_string(room) + ", got " + std::to_string(*asked),
                  "context_length_exceeded");
  }
  max_tokens = asked                    ? static_cast<int>(*asked)
               : kind == api_kind::chat ? room
                                        : std::min(16, room);
  return true;
}

// A list of prompts: each one gets best_of generations, and all of them together are bounded.
bool within_generations(field_reader& r, const parsed_request& out) {
  const size_t generations = std::max<size_t>(out.prompts.size(), 1) * out.best_of;
  if (generations <= static_cast<size_t>(max_generations)) return true;
  return r.fail("prompt", std::to_string(out.prompts.size()) + " prompts with " +
                              std::to_string(out.best_of) + " choices each are " +
                              std::to_string(generations) + " generations; at most " +
                              std::to_string(max_generations) +
                              " per request: send fewer prompts or choices");
}

// The longest prompt: max_tokens must leave it room (a chat has its rendered prompt only).
int longest(const parsed_request& out) {
  size_t most = out.generation.prompt.size();
  for (const auto& p : out.prompts)
    most = std::max(most, p.size());
  return static_cast<int>(most);
}

bool read_model(field_reader& r, const json& body, const request_context& ctx, std::string& model) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return r.fail("model", "model is required");
  if (!it->is_string()) return r.fail("model", "model must be a string");
  model = it->get<std::string>();
  if (model != ctx.info.model_name) {
    return r.fail("model",
                  "the model '" + model + "' is not served here; this server serves '" +
                      ctx.info.model_name + "'",
                  "model_not_found");
  }
  return true;
}

// The body as a JSON object, or the 400 that says why not.
std::optional<api_error> parse_object(std::string_view body, json& j) {
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    // Not only parse errors: a number too large for a double (1e999) is an out_of_range.
    return bad_request("", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return bad_request("", "the body must be a JSON object");
  return std::nullopt;
}

}  // namespace

uint64_t choice_seed(uint64_t seed, int index) {
  if (index == 0) return seed;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

ids_outcome parse_tokenize(std::string_view body, const request_context& ctx) {
  json j;
  if (auto e = parse_object(body, j)) return *e;
  field_reader r(j);
  std::vector<int32_t> ids;
  bool generation_prompt = true;
  if (j.contains("model") && !j["model"].is_null()) {
    std::string model;
    if (!read_model(r, j, ctx, model)) return *r.error;
  }
  const bool has_prompt = r.find("prompt") != nullptr, has_messages = r.find("messages") != nullptr;
  if (has_prompt == has_messages) return bad_request("prompt", "give either prompt or messages");
  const bool ok = has_prompt ? read_prompt(r, j, ctx, ids)
                             : r.get_bool("add_generation_prompt", generation_prompt) &&
                                   read_messages(r, j, ctx, ids, generation_prompt);
  if (!ok) return *r.error;
  return ids;
}

ids_outcome parse_detokenize(std::string_view body, const request_context& ctx) {
  json j;
  if (auto e = parse_object(body, j)) return *e;
  field_reader r(j);
  std::vector<int32_t> ids;
  const json* v = r.find("tokens");
  if (!v) return bad_request("tokens", "tokens is required: a list of token ids");
  if (!int_array(*v, ids)) return bad_request("tokens", "tokens must be a list of token ids");
  if (!tokens_in_vocab(r, "tokens", ids, ctx.info.vocab_size)) return *r.error;
  return ids;
}

parse_outcome parse_request(api_kind kind, std::string_view body, const request_context& ctx) {
  json j;
  if (auto e = parse_object(body, j)) return *e;
  parsed_request out;
  out.kind = kind;
  field_reader r(j);
  generation_request& g = out.generation;
  const bool ok = read_model(r, j, ctx, out.model) && refuse_unsupported(r, kind) &&
                  (kind == api_kind::chat ? read_chat_prompt(r, j, ctx, out)
                                          : read_prompts(r, j, ctx, max_prompts, out.prompts)) &&
                  read_stream(r, out) && read_sampling(r, ctx, g.sampling) &&
                  read_stop(r, out.stop_strings) && read_stop_ids(r, ctx, g.stop_ids) &&
                  read_scenario(r, ctx, g.scenario) && read_cache_salt(r, out.cache_salt) &&
                  read_choices(r, kind, out) && within_generations(r, out) &&
                  read_max_tokens(r, kind, ctx, longest(out), out.prompts.size() > 1, out.echo,
                                  g.max_tokens, out.no_output) &&
                  read_logprobs(r, kind, g.top_logprobs) && read_penalties(r, ctx, g.sampling) &&
                  read_min_tokens(r, out.no_output ? 0 : g.max_tokens, g.sampling);
  if (!ok) return *r.error;
  if (out.prompts.empty()) out.prompts.push_back(g.prompt);
  g.prompt = out.prompts[0];
  out.logprobs = g.top_logprobs;
  // Echoed logprobs hold the prompt's; best_of ranks choices by their tokens' logprobs.
  if (out.echo && out.logprobs >= 0) g.prompt_logprobs = out.logprobs;
  if (out.best_of > out.n) g.top_logprobs = std::max(g.top_logprobs, 0);
  return out;
}

}  // namespace brigade::serve

#include "model/tool_calls.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/chat_template.hpp"

namespace brigade::model {
namespace {

// Ordered, so that arguments keep the order the model wrote them in.
using json = nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";

// The JSON in `text`, or a discarded value: parsing never throws.
json parse_quietly(std::string_view text) {
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// The call `value` describes: {"name": string, "arguments": object}. Some models write the
// arguments as a string holding the object, as OpenAI's API does; that is accepted too.
std::optional<tool_call> call_from_json(const json& value) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  auto arguments = value.find("arguments");
  if (arguments == value.end()) return std::nullopt;
  json object =
      arguments->is_string() ? parse_quietly(arguments->get_ref<const std::string&>()) : *arguments;
  if (!object.is_object()) return std::nullopt;
  tool_call call;
  call.name = name->get<std::string>();
  call.arguments_json = object.dump(-1, ' ', false, json::error_handler_t::replace);
  return call;
}

// The one call between <tool_call> and </tool_call>, or nothing if the body is not one.
std::optional<std::vector<tool_call>> parse_hermes(std::string_view body) {
  std::optional<tool_call> call = call_from_json(parse_quietly(body));
  if (!call) return std::nullopt;
  return std::vector<tool_call>{std::move(*call)};
}

// The calls of the non-empty list after [TOOL_CALLS], or nothing if any entry is not a call.
std::optional<std::vector<tool_call>> parse_mistral(std::string_view body) {
  json list = parse_quietly(body);
  if (!list.is_array() || list.empty()) return std::nullopt;
  std::vector<tool_call> calls;
  for (const json& entry : list) {
    std::optional<tool_call> call = call_from_json(entry);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

constexpr std::string_view kDeepseekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepseekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepseekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepseekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepseekSep = "<｜tool▁sep｜>";

std::string_view trim_space(std::string_view text) {
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) + 1 - first);
}

// One DeepSeek call's text between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>:
// function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```.
std::optional<tool_call> deepseek_call(std::string_view text) {
  const size_t sep = text.find(kDeepseekSep);
  if (sep == std::string_view::npos || trim_space(text.substr(0, sep)) != "function") {
    return std::nullopt;
  }
  std::string_view rest = text.substr(sep + kDeepseekSep.size());
  const size_t newline = rest.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  const std::string_view name = trim_space(rest.substr(0, newline));
  std::string_view fenced = trim_space(rest.substr(newline + 1));
  constexpr std::string_view kOpen = "```json", kClose = "```";
  if (name.empty() || fenced.size() < kOpen.size() + kClose.size() ||
      fenced.substr(0, kOpen.size()) != kOpen ||
      fenced.substr(fenced.size() - kClose.size()) != kClose) {
    return std::nullopt;
  }
  fenced = fenced.substr(kOpen.size(), fenced.size() - kOpen.size() - kClose.size());
  json arguments = parse_quietly(fenced);
  if (!arguments.is_object()) return std::nullopt;
  tool_call call;
  call.name = std::string(name);
  call.arguments_json = arguments.dump(-1, ' ', false, json::error_handler_t::replace);
  return call;
}

// The calls after <｜tool▁calls▁begin｜>, apart only by whitespace; nothing if any is not a call.
std::optional<std::vector<tool_call>> parse_deepseek(std::string_view body) {
  std::vector<tool_call> calls;
  body = trim_space(body);
  while (!body.empty()) {
    if (body.substr(0, kDeepseekCallBegin.size()) != kDeepseekCallBegin) return std::nullopt;
    body.remove_prefix(kDeepseekCallBegin.size());
    const size_t end = body.find(kDeepseekCallEnd);
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<tool_call> call = deepseek_call(body.substr(0, end));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    body = trim_space(body.substr(end + kDeepseekCallEnd.size()));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// The length of the longest end of `text` that begins `tag` without being all of it.
size_t partial_tag_bytes(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

tool_call_parser::tool_call_parser(chat_format format) : format_(format) {
  if (format == chat_format::mistral_inst) {
    open_tag_ = "[TOOL_CALLS]";
  } else if (format == chat_format::deepseek_v3) {
    open_tag_ = kDeepseekCallsBegin;
    close_tag_ = kDeepseekCallsEnd;
  } else {
    open_tag_ = "<tool_call>";
    close_tag_ = "</tool_call>";
  }
}

std::vector<tool_parse_event> tool_call_parser::push(std::string_view text) {
  std::vector<tool_parse_event> out;
  buffer_ += text;
  drain(/*final=*/false, out);
  return out;
}

std::vector<tool_parse_event> tool_call_parser::finish() {
  std::vector<tool_parse_event> out;
  drain(/*final=*/true, out);
  // Whitespace that ends a plain answer is part of it; after a call it only separates.
  if (!held_space_.empty() && !last_was_call_) {
    tool_parse_event event;
    event.text = std::move(held_space_);
    out.push_back(std::move(event));
  }
  held_space_.clear();
  return out;
}

void tool_call_parser::drain(bool final, std::vector<tool_parse_event>& out) {
  bool more = true;
  while (more)
    more = inside_ ? drain_inside(final, out) : drain_outside(final, out);
}

// Gives out the content before the next open tag and consumes the tag; without one, gives out all
// but an end that may still grow into the tag. Returns whether a tag was consumed.
bool tool_call_parser::drain_outside(bool final, std::vector<tool_parse_event>& out) {
  size_t open = buffer_.find(open_tag_);
  if (open == std::string::npos) {
    size_t shown = buffer_.size() - (final ? 0 : partial_tag_bytes(buffer_, open_tag_));
    emit_content(std::string_view(buffer_).substr(0, shown), out);
    buffer_.erase(0, shown);
    return false;
  }
  emit_content(std::string_view(buffer_).substr(0, open), out);
  buffer_.erase(0, open + open_tag_.size());
  inside_ = true;
  return true;
}

// Decides the call whose body buffer_ begins with, once its end is known. Its length is bounded
// by the request's max_tokens, like the rest of the output. Returns whether a call was decided.
bool tool_call_parser::drain_inside(bool final, std::vector<tool_parse_event>& out) {
  size_t close = close_tag_.empty() ? std::string::npos : buffer_.find(close_tag_);
  if (close == std::string::npos) {
    if (!final) return false;
    // Mistral's list runs to the end; DeepSeek's calls may end without their closing tag.
    std::optional<std::vector<tool_call>> calls;
    if (format_ == chat_format::mistral_inst) calls = parse_mistral(buffer_);
    if (format_ == chat_format::deepseek_v3) calls = parse_deepseek(buffer_);
    if (calls) {
      emit_calls(std::move(*calls), out);
    } else {
      emit_content(std::string(open_tag_) + buffer_, out);
    }
    buffer_.clear();
    inside_ = false;
    return false;
  }
  std::string_view body = std::string_view(buffer_).substr(0, close);
  std::optional<std::vector<tool_call>> calls =
      format_ == chat_format::deepseek_v3 ? parse_deepseek(body) : parse_hermes(body);
  if (calls) {
    emit_calls(std::move(*calls), out);
  } else {
    emit_content(std::string(open_tag_) + std::string(body) + std::string(close_tag_), out);
  }
  buffer_.erase(0, close + close_tag_.size());
  inside_ = false;
  return true;
}

// Whitespace at the end of content is held: it is given out once more content follows, and dropped
// if a call follows instead.
void tool_call_parser::emit_content(std::string_view text, std::vector<tool_parse_event>& out) {
  held_space_ += text;
  size_t last = held_space_.find_last_not_of(kSpace);
  if (last == std::string::npos) return;
  if (out.empty() || out.back().what != tool_parse_event::kind::content) {
    out.emplace_back();
  }
  out.back().text.append(held_space_, 0, last + 1);
  held_space_.erase(0, last + 1);
  last_was_call_ = false;
}

void tool_call_parser::emit_calls(std::vector<tool_call> calls,
                                  std::vector<tool_parse_event>& out) {
  held_space_.clear();
  for (tool_call& call : calls) {
    tool_parse_event event;
    event.what = tool_parse_event::kind::call;
    event.call = std::move(call);
    out.push_back(std::move(event));
  }
  last_was_call_ = true;
  saw_tool_call_ = true;
}

}  // namespace brigade::model

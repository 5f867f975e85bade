#include "serve/openai_response.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace brigade::serve {
namespace {

using nlohmann::json;

// Model output may hold any bytes the tokenizer produced; invalid UTF-8 is replaced, never thrown.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_json(const generation_usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          // DeepSeek's names for the same split, for clients that read those.
          {"prompt_cache_hit_tokens", u.cached_tokens},
          {"prompt_cache_miss_tokens", u.prompt_tokens - u.cached_tokens}};
}

json head(const response_meta& meta, const char* object) {
  return {
      {"id", meta.id}, {"object", object}, {"created", meta.created_unix_s}, {"model", meta.model}};
}

// JSON has no -inf: a token the sampling rules ruled out gets OpenAI's floor.
double finite(float logprob) {
  return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0;
}

json bytes_of(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text)
    out.push_back(static_cast<int>(c));
  return out;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}], "refusal": null}.
// Completions: {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}, the
// offsets counted in bytes of token text from the start of the completion.
json logprobs_json(api_kind kind, const std::vector<logprob_entry>* entries) {
  if (!entries) return nullptr;
  if (kind == api_kind::chat) {
    json content = json::array();
    for (const logprob_entry& e : *entries) {
      json top = json::array();
      // Chat has no echo, so every entry is a scored token.
      for (const token_text_logprob& t : e.top) {
        top.push_back(
            {{"token", t.text}, {"logprob", finite(t.logprob)}, {"bytes", bytes_of(t.text)}});
      }
      content.push_back({{"token", e.chosen.text},
                         {"logprob", finite(e.chosen.logprob)},
                         {"bytes", bytes_of(e.chosen.text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const logprob_entry& e : *entries) {
    tokens.push_back(e.chosen.text);
    offsets.push_back(e.text_offset);
    if (e.unscored) {
      logprobs.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    logprobs.push_back(finite(e.chosen.logprob));
    json top = json::object();
    for (const token_text_logprob& t : e.top)
      if (!top.contains(t.text)) top[t.text] = finite(t.logprob);
    tops.push_back(top);
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

// [{"id", "type": "function", "function": {"name", "arguments"}}]; stream deltas (first >= 0)
// also number each call, as OpenAI's chunks do (a call comes whole, in one delta).
json calls_json(const std::vector<model::tool_call>& calls, int first) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments_json}}}};
    if (first >= 0) c["index"] = first + static_cast<int>(i);
    out.push_back(std::move(c));
  }
  return out;
}

json reason_json(const char* finish_reason) {
  return finish_reason ? json(finish_reason) : json(nullptr);
}

}  // namespace

std::string whole_response(const response_meta& meta, const std::vector<choice_output>& choices,
                           const generation_usage& usage) {
  const bool chat = meta.kind == api_kind::chat;
  json j = head(meta, chat ? "chat.completion" : "text_completion");
  json all = json::array();
  for (const choice_output& c : choices) {
    json choice = {{"index", c.index},
                   {"logprobs", logprobs_json(meta.kind, c.logprobs)},
                   {"finish_reason", reason_json(c.finish_reason)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        // OpenAI's shape: content null when the answer is only calls.
        if (c.text.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = calls_json(c.tool_calls, -1);
      }
    } else {
      choice["text"] = c.text;
    }
    all.push_back(std::move(choice));
  }
  j["choices"] = std::move(all);
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string stream_chunk(const response_meta& meta, const choice_output& c) {
  json choice = {{"index", c.index},
                 {"logprobs", logprobs_json(meta.kind, c.logprobs)},
                 {"finish_reason", reason_json(c.finish_reason)}};
  json j;
  if (meta.kind == api_kind::chat) {
    j = head(meta, "chat.completion.chunk");
    json delta = json::object();
    if (c.role) delta["role"] = "assistant";
    if (c.role || !c.text.empty()) delta["content"] = c.text;
    if (!c.tool_calls.empty()) delta["tool_calls"] = calls_json(c.tool_calls, c.first_call);
    choice["delta"] = delta;
  } else {
    j = head(meta, "text_completion");
    choice["text"] = c.text;
  }
  j["choices"] = json::array({choice});
  if (meta.include_usage) j["usage"] = nullptr;
  return dump(j);
}

std::string usage_chunk(const response_meta& meta, const generation_usage& usage) {
  json j = head(meta, meta.kind == api_kind::chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string model_response(const service_info& info) {
  return dump({{"id", info.model_name},
               {"object", "model"},
               {"created", info.created_unix_s},
               {"owned_by", "brigade"},
               {"max_model_len", info.context_tokens}});
}

std::string models_response(const service_info& info) {
  return dump({{"object", "list"}, {"data", json::array({json::parse(model_response(info))})}});
}

}  // namespace brigade::serve

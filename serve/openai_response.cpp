#include "serve/openai_response.hpp"

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

json reason_json(const char* finish_reason) {
  return finish_reason ? json(finish_reason) : json(nullptr);
}

}  // namespace

std::string whole_response(const response_meta& meta, const std::string& text,
                           const char* finish_reason, const generation_usage& usage) {
  json choice = {
      {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason_json(finish_reason)}};
  json j;
  if (meta.kind == api_kind::chat) {
    j = head(meta, "chat.completion");
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    j = head(meta, "text_completion");
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string stream_chunk(const response_meta& meta, const std::string& text,
                         const char* finish_reason, bool role) {
  json choice = {
      {"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason_json(finish_reason)}};
  json j;
  if (meta.kind == api_kind::chat) {
    j = head(meta, "chat.completion.chunk");
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    j = head(meta, "text_completion");
    choice["text"] = text;
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

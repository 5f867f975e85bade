// The JSON bodies the OpenAI API answers with: whole completions, stream chunks, usage, models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serve/inference_service.hpp"
#include "serve/openai_request.hpp"

namespace brigade::serve {

/// What every response and chunk of one request repeats.
struct response_meta {
  api_kind kind = api_kind::completion;
  std::string id;  ///< "cmpl-N" or "chatcmpl-N".
  int64_t created_unix_s = 0;
  std::string model;
  bool include_usage = false;  ///< Streamed chunks then carry "usage": null until the last.
};

/// A token's log-probability and its likeliest alternatives, with their text.
struct token_text_logprob {
  std::string text;  ///< The token decoded alone (may be part of a character).
  float logprob = 0.0f;
};
struct logprob_entry {
  token_text_logprob chosen;
  std::vector<token_text_logprob> top;
  size_t text_offset = 0;  ///< Bytes of the completion's token texts before this one.
};

/// A non-streamed answer: text_completion or chat.completion. `logprobs` is null when the
/// request asked for none.
std::string whole_response(const response_meta& meta, const std::string& text,
                           const char* finish_reason, const generation_usage& usage,
                           const std::vector<logprob_entry>* logprobs = nullptr);

/// One streamed chunk. `finish_reason` null means not finished; `role` opens a chat answer
/// ({"role": "assistant"} in the delta); `logprobs` are those of the chunk's tokens.
std::string stream_chunk(const response_meta& meta, const std::string& text,
                         const char* finish_reason, bool role = false,
                         const std::vector<logprob_entry>* logprobs = nullptr);

/// The last chunk when stream_options.include_usage is set: empty choices and the usage.
std::string usage_chunk(const response_meta& meta, const generation_usage& usage);

/// GET /v1/models.
std::string models_response(const service_info& info);
/// GET /v1/models/{name}.
std::string model_response(const service_info& info);

}  // namespace brigade::serve

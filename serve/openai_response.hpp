// The JSON bodies the OpenAI API answers with: whole completions, stream chunks, usage, models.
#pragma once

#include <cstdint>
#include <string>

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

/// A non-streamed answer: text_completion or chat.completion.
std::string whole_response(const response_meta& meta, const std::string& text,
                           const char* finish_reason, const generation_usage& usage);

/// One streamed chunk. `finish_reason` null means not finished; `role` opens a chat answer
/// ({"role": "assistant"} in the delta).
std::string stream_chunk(const response_meta& meta, const std::string& text,
                         const char* finish_reason, bool role = false);

/// The last chunk when stream_options.include_usage is set: empty choices and the usage.
std::string usage_chunk(const response_meta& meta, const generation_usage& usage);

/// GET /v1/models.
std::string models_response(const service_info& info);
/// GET /v1/models/{name}.
std::string model_response(const service_info& info);

}  // namespace brigade::serve

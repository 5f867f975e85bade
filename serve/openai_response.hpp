// The JSON bodies the OpenAI API answers with: whole completions, stream chunks, usage, models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tool_calls.hpp"
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
  size_t text_offset = 0;  ///< Bytes of the answer's token texts before this one.
  bool unscored = false;   ///< The prompt's first token (echo): nothing predicts it, so null.
};

/// One choice of an answer, or its part in a stream chunk.
struct choice_output {
  int index = 0;
  std::string text;                     ///< The text (completions) or content (chat).
  const char* finish_reason = nullptr;  ///< Null while it runs (chunks).
  /// Null when the request asked for none; else those of the tokens of `text`.
  const std::vector<logprob_entry>* logprobs = nullptr;
  bool role = false;  ///< Chunks: opens a chat answer ({"role": "assistant"} in the delta).
  /// Chat: the tool calls the model made (answers: all; chunks: those new in the chunk, the
  /// first being the choice's call number first_call).
  std::vector<model::tool_call> tool_calls;
  int first_call = 0;
};

/// A non-streamed answer: text_completion or chat.completion.
std::string whole_response(const response_meta& meta, const std::vector<choice_output>& choices,
                           const generation_usage& usage);

/// One streamed chunk: one choice's new text, and its finish reason once it ends.
std::string stream_chunk(const response_meta& meta, const choice_output& choice);

/// The last chunk when stream_options.include_usage is set: empty choices and the usage.
std::string usage_chunk(const response_meta& meta, const generation_usage& usage);

/// GET /v1/models.
std::string models_response(const service_info& info);
/// GET /v1/models/{name}.
std::string model_response(const service_info& info);

}  // namespace brigade::serve

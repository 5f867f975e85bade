// One request's answer, built from the service's callbacks: tokens are decoded incrementally,
// checked against stop strings, and turned into SSE chunks (stream) or one JSON body (whole).
// It knows nothing of sockets: the HTTP session writes whatever bytes it returns, in order.
//
//   open() --> on_tokens()* --> on_finished() | on_error()    -> complete()
//                    \--(stop string matched)--------------------> complete(), stop_matched()
//
// After a stop string matched, the caller cancels the request; later callbacks return nothing.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer.hpp"
#include "serve/openai_request.hpp"
#include "serve/openai_response.hpp"
#include "serve/request_metrics.hpp"
#include "serve/stop_matcher.hpp"

namespace brigade::serve {

class generation_stream {
 public:
  using clock = std::chrono::steady_clock;

  generation_stream(const parsed_request& request, response_meta meta, const model::tokenizer& tok,
                    request_metrics& metrics, clock::time_point received);

  bool streaming() const { return streaming_; }
  /// The bytes that open a stream (chat: the chunk with the assistant role); "" otherwise.
  std::string open();
  /// Bytes to send now: SSE events when streaming, "" for a whole answer until it completes.
  /// `logprobs` holds one entry per token when the request asked for them, else none.
  std::string on_tokens(const std::vector<int32_t>& tokens,
                        const std::vector<model::position_logprobs>& logprobs = {});
  /// The prompt tokens the prefix cache served, for the usage of an answer a stop string ends.
  void on_cached(int cached_tokens) { cached_tokens_ = cached_tokens; }
  /// The rest of the answer: the last chunks and [DONE], or the whole JSON body.
  std::string on_finished(finish_reason reason, const generation_usage& usage);
  /// An error event and [DONE] when streaming; the error body otherwise.
  std::string on_error(const error& err);
  /// The client went away: no bytes will be sent again.
  void client_gone();

  bool complete() const { return complete_; }
  bool stop_matched() const { return stop_matched_; }
  /// The status of a whole answer: 200, or the error's status.
  int whole_status() const { return whole_status_; }

 private:
  std::string finish_with(const char* openai_reason, const generation_usage& usage);
  std::string text_chunk(const std::string& text);
  token_text_logprob text_of(const model::token_logprob& t) const;
  const std::vector<logprob_entry>* logprobs_or_null() const {
    return wants_logprobs_ ? &logprobs_ : nullptr;
  }

  bool streaming_;
  response_meta meta_;
  request_metrics& metrics_;
  model::incremental_decoder decoder_;
  stop_matcher stops_;
  int prompt_tokens_;
  clock::time_point received_;
  clock::time_point first_token_at_;
  clock::time_point last_token_at_;
  int tokens_ = 0;
  int cached_tokens_ = 0;
  std::string text_;  // Whole answers only: the text so far.
  const model::tokenizer& tok_;
  bool wants_logprobs_;
  // Whole answers: every token's; streams: those of tokens not yet sent in a chunk.
  std::vector<logprob_entry> logprobs_;
  size_t logprob_offset_ = 0;
  bool complete_ = false;
  bool stop_matched_ = false;
  int whole_status_ = 200;
};

}  // namespace brigade::serve

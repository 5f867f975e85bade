// One request's answer, built from the service's callbacks for each of its choices: tokens are
// decoded incrementally, checked against stop strings, and turned into SSE chunks (stream) or
// one JSON body (whole). It knows nothing of sockets: the HTTP session writes whatever bytes it
// returns, in order.
//
// A request has best_of choices (n unless best_of asks for more) per prompt (a completion may
// send a list of prompts), each its own generation; choice k is prompt k / best_of's:
//
//   open() --> per choice: on_prompt_logprobs()? on_tokens()* --> on_finished() | on_error()
//                                    \--(stop string matched)--> choice_ended()
//   complete() once every choice ended, or at the first error (the answer is then the error's).
//
// After a choice's stop string matched, the caller cancels that choice; later callbacks for an
// ended choice return nothing.
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
  ~generation_stream();

  bool streaming() const { return streaming_; }
  /// Generations behind the answer (prompts x best_of).
  int choices() const { return static_cast<int>(choices_.size()); }
  /// The bytes that open a stream (chat: a chunk with the assistant role per choice); "" else.
  std::string open();
  /// The log-probabilities of `choice`'s prompt, from whichever of its choices computed them
  /// first (echo).
  void on_prompt_logprobs(int choice, const std::vector<model::position_logprobs>& logprobs);
  /// Bytes to send now: SSE events when streaming, "" for a whole answer until it completes.
  /// `logprobs` holds one entry per token when the request asked for them, else none.
  std::string on_tokens(int choice, const std::vector<int32_t>& tokens,
                        const std::vector<model::position_logprobs>& logprobs = {});
  /// The prompt tokens the prefix cache served, for the usage of an answer a stop string ends.
  void on_cached(int choice, int cached_tokens);
  /// The rest of the choice; once every choice ended, the last chunks and [DONE], or the body.
  std::string on_finished(int choice, finish_reason reason, const generation_usage& usage);
  /// An error event and [DONE] when streaming; the error body otherwise. Ends the answer.
  std::string on_error(const error& err);
  /// The client went away: no bytes will be sent again.
  void client_gone();

  bool complete() const { return complete_; }
  /// The choice produced its last token (finished, or a stop string matched): a service still
  /// running it should be told to stop.
  bool choice_ended(int choice) const;
  /// The status of a whole answer: 200, or the error's status.
  int whole_status() const { return whole_status_; }

 private:
  struct choice_state;
  std::string end_choice(choice_state& c, const char* openai_reason);
  std::string finish_all();
  std::string text_chunk(choice_state& c, const std::string& text);
  std::string content_chunk(choice_state& c, const std::string& text);
  std::string parsed_chunks(choice_state& c, std::vector<model::tool_parse_event> events);
  std::string echo_chunk(choice_state& c);
  token_text_logprob text_of(const model::token_logprob& t) const;
  void add_logprobs(choice_state& c, const std::vector<model::position_logprobs>& logprobs);

  bool streaming_;
  response_meta meta_;
  request_metrics& metrics_;
  const model::tokenizer& tok_;
  int answered_;    // n: the choices the answer shows per prompt
  int per_prompt_;  // best_of: the generations per prompt
  bool wants_logprobs_;
  bool echo_;
  bool no_output_;
  bool parse_tool_calls_;
  model::chat_format format_;
  std::string forced_prefix_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<model::position_logprobs>> prompt_logprobs_;  // per prompt
  std::vector<char> have_prompt_logprobs_;                              // per prompt
  std::vector<std::string> stop_strings_;
  std::vector<std::unique_ptr<choice_state>> choices_;
  clock::time_point received_;
  bool first_token_seen_ = false;
  int ended_ = 0;
  bool complete_ = false;
  int whole_status_ = 200;
};

}  // namespace brigade::serve

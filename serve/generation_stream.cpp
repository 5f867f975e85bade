#include "serve/generation_stream.hpp"

#include "serve/api_error.hpp"
#include "serve/sse.hpp"

namespace brigade::serve {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

generation_stream::generation_stream(const parsed_request& request, response_meta meta,
                                     const model::tokenizer& tok, request_metrics& metrics,
                                     clock::time_point received)
    : streaming_(request.stream),
      meta_(std::move(meta)),
      metrics_(metrics),
      decoder_(tok, /*skip_special=*/true),
      stops_(request.stop_strings),
      prompt_tokens_(static_cast<int>(request.generation.prompt.size())),
      received_(received),
      tok_(tok),
      wants_logprobs_(request.generation.top_logprobs >= 0) {}

token_text_logprob generation_stream::text_of(const model::token_logprob& t) const {
  return {tok_.decode({t.token}), t.logprob};
}

std::string generation_stream::open() {
  if (!streaming_ || meta_.kind != api_kind::chat) return {};
  return sse_event(stream_chunk(meta_, "", nullptr, /*role=*/true));
}

// A stream's log-probabilities ride on the first chunk sent after their tokens arrived (text
// held back for a partial character or a possible stop string comes later).
std::string generation_stream::text_chunk(const std::string& text) {
  if (text.empty()) return {};
  if (!streaming_) {
    text_ += text;
    return {};
  }
  std::string out = sse_event(stream_chunk(meta_, text, nullptr, false, logprobs_or_null()));
  logprobs_.clear();
  return out;
}

std::string generation_stream::on_tokens(const std::vector<int32_t>& tokens,
                                         const std::vector<model::position_logprobs>& logprobs) {
  if (complete_) return {};
  if (wants_logprobs_) {
    for (const model::position_logprobs& p : logprobs) {
      logprob_entry e;
      e.chosen = text_of(p.chosen);
      for (const model::token_logprob& t : p.top)
        e.top.push_back(text_of(t));
      e.text_offset = logprob_offset_;
      logprob_offset_ += e.chosen.text.size();
      logprobs_.push_back(std::move(e));
    }
  }
  const clock::time_point now = clock::now();
  std::string decoded;
  for (int32_t t : tokens) {
    if (tokens_ == 0) {
      first_token_at_ = now;
      metrics_.first_token(seconds(now - received_));
    } else {
      metrics_.inter_token(seconds(now - last_token_at_));
    }
    last_token_at_ = now;
    ++tokens_;
    decoded += decoder_.push(t);
  }
  stop_matcher::released r = stops_.push(decoded);
  std::string out = text_chunk(r.text);
  if (r.matched) {
    stop_matched_ = true;
    out += finish_with("stop", {prompt_tokens_, tokens_, cached_tokens_});
  }
  return out;
}

std::string generation_stream::on_finished(finish_reason reason, const generation_usage& usage) {
  if (complete_) return {};
  // The decoder's and the stop matcher's tails are text too; a stop string may still match.
  stop_matcher::released r = stops_.push(decoder_.finish());
  std::string out = text_chunk(r.text);
  if (!r.matched) out += text_chunk(stops_.finish());
  return out + finish_with(r.matched ? "stop" : openai_finish_reason(reason), usage);
}

std::string generation_stream::finish_with(const char* openai_reason,
                                           const generation_usage& usage) {
  complete_ = true;
  const clock::time_point end = tokens_ > 0 ? last_token_at_ : clock::now();
  const double tpot = tokens_ > 1 ? seconds(last_token_at_ - first_token_at_) / (tokens_ - 1) : -1;
  metrics_.finished(seconds(end - received_), tpot, usage, openai_reason);
  if (!streaming_) return whole_response(meta_, text_, openai_reason, usage, logprobs_or_null());
  // Log-probabilities of tokens whose text never came out (a stop string) go with the end.
  const bool left = wants_logprobs_ && !logprobs_.empty();
  std::string out =
      sse_event(stream_chunk(meta_, "", openai_reason, false, left ? &logprobs_ : nullptr));
  if (meta_.include_usage) out += sse_event(usage_chunk(meta_, usage));
  return out + sse_done();
}

std::string generation_stream::on_error(const error& err) {
  if (complete_) return {};
  complete_ = true;
  // A cancel this stream did not ask for (it would be complete by now) is the service
  // stopping, as unavailable is.
  const bool shutdown = err.code == errc::unavailable || err.code == errc::cancelled;
  metrics_.failed(shutdown ? "shutdown" : "error");
  api_error e = from_service_error(err);
  if (!streaming_) {
    whole_status_ = e.http_status;
    return error_body(e);
  }
  return sse_event(error_body(e)) + sse_done();
}

void generation_stream::client_gone() {
  if (complete_) return;
  complete_ = true;
  metrics_.failed("client_disconnected");
}

}  // namespace brigade::serve

#include "serve/generation_stream.hpp"

#include <algorithm>
#include <numeric>

#include "model/chat_template.hpp"
#include "serve/api_error.hpp"
#include "serve/sse.hpp"

namespace brigade::serve {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

struct generation_stream::choice_state {
  choice_state(const model::tokenizer& tok, const std::vector<std::string>& stops, int i, size_t p)
      : index(i), prompt(p), decoder(tok, /*skip_special=*/true), stop(stops) {}

  int index;      // as streamed: prompt * n + its number (a stream has best_of = n)
  size_t prompt;  // which prompt of the request it continues
  model::incremental_decoder decoder;
  stop_matcher stop;
  int tokens = 0;
  std::string text;  // Whole answers only: the text so far.
  // Whole answers: every token's; streams: those of tokens not yet sent in a chunk.
  std::vector<logprob_entry> logprobs;
  size_t logprob_offset = 0;
  double cumulative_logprob = 0.0;  // Ranks best_of choices.
  bool echoed = false;
  bool ended = false;
  const char* reason = nullptr;
  int cached_tokens = 0;
  std::unique_ptr<model::tool_call_parser> tools;  // Chat with tools: splits out the calls.
  std::vector<model::tool_call> tool_calls;        // Whole answers: the calls so far.
  int calls = 0;
  std::vector<model::tool_parse_event> text_pending;  // From the forced prefix, if any.
  clock::time_point first_token_at;
  clock::time_point last_token_at;
};

generation_stream::generation_stream(const parsed_request& request, response_meta meta,
                                     const model::tokenizer& tok, request_metrics& metrics,
                                     clock::time_point received)
    : streaming_(request.stream),
      meta_(std::move(meta)),
      metrics_(metrics),
      tok_(tok),
      answered_(request.n),
      per_prompt_(std::max(request.best_of, 1)),
      wants_logprobs_(request.logprobs >= 0),
      echo_(request.echo),
      no_output_(request.no_output),
      parse_tool_calls_(request.parse_tool_calls),
      format_(request.format),
      forced_prefix_(request.forced_prefix),
      prompts_(request.prompts),
      stop_strings_(request.stop_strings),
      received_(received) {
  if (prompts_.empty()) prompts_.push_back(request.generation.prompt);
  prompt_logprobs_.resize(prompts_.size());
  have_prompt_logprobs_.assign(prompts_.size(), 0);
  for (size_t k = 0; k < prompts_.size() * static_cast<size_t>(per_prompt_); ++k) {
    const size_t prompt = k / static_cast<size_t>(per_prompt_);
    const int number = static_cast<int>(k % static_cast<size_t>(per_prompt_));
    choices_.push_back(std::make_unique<choice_state>(
        tok, stop_strings_, static_cast<int>(prompt) * answered_ + number, prompt));
    if (!parse_tool_calls_) continue;
    choice_state& c = *choices_.back();
    c.tools = std::make_unique<model::tool_call_parser>(format_);
    // The call's opening that tool_choice put in the prompt is the answer's start: the parser
    // reads it before the model's text (it opens a call, so it yields nothing yet).
    if (!forced_prefix_.empty()) c.text_pending = c.tools->push(forced_prefix_);
  }
}

generation_stream::~generation_stream() = default;

token_text_logprob generation_stream::text_of(const model::token_logprob& t) const {
  return {tok_.decode({t.token}), t.logprob};
}

bool generation_stream::choice_ended(int choice) const {
  return choices_[static_cast<size_t>(choice)]->ended;
}

std::string generation_stream::open() {
  if (!streaming_ || meta_.kind != api_kind::chat) return {};
  std::string out;
  for (const auto& c : choices_) {
    choice_output o;
    o.index = c->index;
    o.role = true;
    out += sse_event(stream_chunk(meta_, o));
  }
  return out;
}

void generation_stream::on_prompt_logprobs(int choice,
                                           const std::vector<model::position_logprobs>& logprobs) {
  if (choice < 0 || choice >= choices()) return;
  const size_t prompt = choices_[static_cast<size_t>(choice)]->prompt;
  if (have_prompt_logprobs_[prompt]) return;
  have_prompt_logprobs_[prompt] = 1;
  prompt_logprobs_[prompt] = logprobs;
}

// The prompt's text (and its log-probabilities) before a choice's own, once: whole answers
// keep it, streams send it as the choice's first chunk.
std::string generation_stream::echo_chunk(choice_state& c) {
  if (!echo_ || c.echoed) return {};
  c.echoed = true;
  const std::vector<int32_t>& prompt = prompts_[c.prompt];
  const std::vector<model::position_logprobs>& scored = prompt_logprobs_[c.prompt];
  if (wants_logprobs_) {
    for (size_t i = 0; i < prompt.size(); ++i) {
      logprob_entry e;
      e.text_offset = c.logprob_offset;
      // The first token has nothing before it to predict it; the others have a row each.
      if (i == 0 || i - 1 >= scored.size()) {
        e.chosen = {tok_.decode({prompt[i]}), 0.0f};
        e.unscored = true;
      } else {
        const model::position_logprobs& p = scored[i - 1];
        e.chosen = text_of(p.chosen);
        for (const model::token_logprob& t : p.top)
          e.top.push_back(text_of(t));
      }
      c.logprob_offset += e.chosen.text.size();
      c.logprobs.push_back(std::move(e));
    }
  }
  return text_chunk(c, tok_.decode(prompt));
}

void generation_stream::add_logprobs(choice_state& c,
                                     const std::vector<model::position_logprobs>& logprobs) {
  for (const model::position_logprobs& p : logprobs) {
    c.cumulative_logprob += static_cast<double>(p.chosen.logprob);
    if (!wants_logprobs_) continue;
    logprob_entry e;
    e.chosen = text_of(p.chosen);
    for (const model::token_logprob& t : p.top)
      e.top.push_back(text_of(t));
    e.text_offset = c.logprob_offset;
    c.logprob_offset += e.chosen.text.size();
    c.logprobs.push_back(std::move(e));
  }
}

// A stream's log-probabilities ride on the first chunk sent after their tokens arrived (text
// held back for a partial character or a possible stop string comes later).
std::string generation_stream::text_chunk(choice_state& c, const std::string& text) {
  if (text.empty()) return {};
  if (!c.tools) return content_chunk(c, text);
  std::string out;
  if (!c.text_pending.empty()) out = parsed_chunks(c, std::move(c.text_pending));
  c.text_pending.clear();
  return out + parsed_chunks(c, c.tools->push(text));
}

// Content and tool calls, as the parser split them; a call gets its id here.
std::string generation_stream::parsed_chunks(choice_state& c,
                                             std::vector<model::tool_parse_event> events) {
  std::string out;
  for (model::tool_parse_event& e : events) {
    if (e.what == model::tool_parse_event::kind::content) {
      out += content_chunk(c, e.text);
      continue;
    }
    e.call.id = "call_" + meta_.id + "_" + std::to_string(c.index) + "_" + std::to_string(c.calls);
    const int number = c.calls++;
    if (!streaming_) {
      c.tool_calls.push_back(std::move(e.call));
      continue;
    }
    choice_output o;
    o.index = c.index;
    o.tool_calls.push_back(std::move(e.call));
    o.first_call = number;
    o.logprobs = wants_logprobs_ ? &c.logprobs : nullptr;
    out += sse_event(stream_chunk(meta_, o));
    c.logprobs.clear();
  }
  return out;
}

std::string generation_stream::content_chunk(choice_state& c, const std::string& text) {
  if (text.empty()) return {};
  if (!streaming_) {
    c.text += text;
    return {};
  }
  choice_output o;
  o.index = c.index;
  o.text = text;
  o.logprobs = wants_logprobs_ ? &c.logprobs : nullptr;
  std::string out = sse_event(stream_chunk(meta_, o));
  c.logprobs.clear();
  return out;
}

std::string generation_stream::on_tokens(int choice, const std::vector<int32_t>& tokens,
                                         const std::vector<model::position_logprobs>& logprobs) {
  choice_state& c = *choices_[static_cast<size_t>(choice)];
  if (complete_ || c.ended) return {};
  std::string out = echo_chunk(c);
  // max_tokens 0: the token generated while scoring the prompt is not part of the answer.
  if (no_output_) return out;
  add_logprobs(c, logprobs);
  const clock::time_point now = clock::now();
  std::string decoded;
  for (int32_t t : tokens) {
    if (!first_token_seen_) {
      first_token_seen_ = true;
      metrics_.first_token(seconds(now - received_));
    } else if (c.tokens > 0) {
      metrics_.inter_token(seconds(now - c.last_token_at));
    }
    if (c.tokens == 0) c.first_token_at = now;
    c.last_token_at = now;
    ++c.tokens;
    decoded += c.decoder.push(t);
  }
  stop_matcher::released r = c.stop.push(decoded);
  out += text_chunk(c, r.text);
  if (r.matched) out += end_choice(c, "stop");
  return out;
}

void generation_stream::on_cached(int choice, int cached_tokens) {
  choices_[static_cast<size_t>(choice)]->cached_tokens = cached_tokens;
}

std::string generation_stream::on_finished(int choice, finish_reason reason,
                                           const generation_usage& usage) {
  choice_state& c = *choices_[static_cast<size_t>(choice)];
  if (complete_ || c.ended) return {};
  c.cached_tokens = usage.cached_tokens;
  std::string out = echo_chunk(c);
  // The decoder's and the stop matcher's tails are text too; a stop string may still match.
  stop_matcher::released r = c.stop.push(c.decoder.finish());
  out += text_chunk(c, r.text);
  if (!r.matched) out += text_chunk(c, c.stop.finish());
  return out + end_choice(c, r.matched ? "stop" : openai_finish_reason(reason));
}

std::string generation_stream::end_choice(choice_state& c, const char* openai_reason) {
  std::string out;
  if (c.tools) {
    // A call left open, or a marker held back, is content now; an answer that called a tool
    // (and was not cut short) ends for that reason.
    out += parsed_chunks(c, c.tools->finish());
    if (c.calls > 0 && std::string(openai_reason) == "stop") openai_reason = "tool_calls";
  }
  c.ended = true;
  c.reason = openai_reason;
  ++ended_;
  if (streaming_) {
    // Log-probabilities of tokens whose text never came out (a stop string) go with the end.
    choice_output o;
    o.index = c.index;
    o.finish_reason = openai_reason;
    o.logprobs = wants_logprobs_ && !c.logprobs.empty() ? &c.logprobs : nullptr;
    out += sse_event(stream_chunk(meta_, o));
    c.logprobs.clear();
  }
  if (ended_ == choices()) out += finish_all();
  return out;
}

// Every choice ended: the usage of them all, and the answer.
std::string generation_stream::finish_all() {
  complete_ = true;
  generation_usage usage;
  for (size_t prompt = 0; prompt < prompts_.size(); ++prompt) {
    usage.prompt_tokens += static_cast<int>(prompts_[prompt].size());
    usage.cached_tokens += choices_[prompt * static_cast<size_t>(per_prompt_)]->cached_tokens;
  }
  for (const auto& c : choices_)
    usage.completion_tokens += c->tokens;
  const choice_state& first = *choices_[0];
  const clock::time_point end = first.tokens > 0 ? first.last_token_at : clock::now();
  const double tpot = first.tokens > 1
                          ? seconds(first.last_token_at - first.first_token_at) / (first.tokens - 1)
                          : -1;
  metrics_.finished(seconds(end - received_), tpot, usage, first.reason);
  if (streaming_) {
    std::string out;
    if (meta_.include_usage) out += sse_event(usage_chunk(meta_, usage));
    return out + sse_done();
  }
  // Per prompt, best_of: the n choices whose tokens are likeliest together, likeliest first.
  std::vector<choice_output> shown;
  for (size_t prompt = 0; prompt < prompts_.size(); ++prompt) {
    std::vector<size_t> order(static_cast<size_t>(per_prompt_));
    std::iota(order.begin(), order.end(), prompt * static_cast<size_t>(per_prompt_));
    if (answered_ < per_prompt_) {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return choices_[a]->cumulative_logprob > choices_[b]->cumulative_logprob;
      });
      order.resize(static_cast<size_t>(answered_));
    }
    for (size_t k : order) {
      choice_state& c = *choices_[k];
      choice_output o;
      o.index = static_cast<int>(shown.size());
      o.text = std::move(c.text);
      o.tool_calls = std::move(c.tool_calls);
      o.finish_reason = c.reason;
      o.logprobs = wants_logprobs_ ? &c.logprobs : nullptr;
      shown.push_back(std::move(o));
    }
  }
  return whole_response(meta_, shown, usage);
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

#include "model/engine.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "model/kv_layout.hpp"
#include "model/speculation.hpp"
#include "model/transformer.hpp"

namespace brigade::model {

struct engine::sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int prompt_tokens = 0;
  int computed = 0;  // tokens whose keys and values are in the cache
  std::vector<int32_t> blocks;
  request_options options;
  std::vector<int32_t> generated;
  std::vector<float> logits;
  finish_reason finished = finish_reason::none;
  draft_window drafts;
  std::vector<position_logprobs> prompt_logprobs;  // until the first token carries them
};

engine::engine(const loaded_model& model, gpu::backend& dev, const engine_options& options)
    : model_(model),
      options_(options),
      pool_((options.kv_tokens + options.block_tokens - 1) / options.block_tokens),
      ws_(model.config, dev, options.max_step_tokens) {
  kv_ = dev.make_kv(
      kv_layout_for(model.config, pool_.capacity(), options.block_tokens, options.kv_dtype));
  // A draft forward takes every drafting sequence at once; a context catches up in chunks, a
  // step's prefill budget of them a step.
  const draft_source_limits limits{options.kv_tokens, options.block_tokens,
                                   std::max(options.max_step_tokens, options.max_running),
                                   options.max_step_tokens};
  drafts_ = make_draft_source(options.speculation, options.draft_weights, limits,
                              options.confidence_head);
  if (options.confidence_head && options.speculation.draft == draft_kind::model)
    options_.speculation.adaptive = false;
  if (drafts_ && options.speculation.measured_gate)
    gate_ = options.gate ? options.gate : std::make_shared<speculation_gate>();
}

engine::~engine() = default;

int engine::blocks_for(int tokens) const {
  return (tokens + options_.block_tokens - 1) / options_.block_tokens;
}

result<int64_t> engine::submit(std::vector<int32_t> prompt, const request_options& options) {
  const model_config& c = model_.config;
  if (prompt.empty()) return error(errc::invalid_argument, "the prompt has no tokens");
  for (int32_t t : prompt) {
    if (t < 0 || t >= c.vocab_size) {
      return error(errc::invalid_argument, "prompt token id " + std::to_string(t) +
                                               " is outside the vocabulary [0, " +
                                               std::to_string(c.vocab_size) + ")");
    }
  }
  if (options.max_tokens < 1) return error(errc::invalid_argument, "max_tokens must be at least 1");
  if (status ok = check_sampling(options.sampling, c.vocab_size); !ok) return ok.err();
  if (options.top_logprobs < -1 || options.top_logprobs > max_top_logprobs) {
    return error(errc::invalid_argument, "top_logprobs " + std::to_string(options.top_logprobs) +
                                             " is not in [-1, " + std::to_string(max_top_logprobs) +
                                             "]");
  }
  if (options.prompt_logprobs < -1 || options.prompt_logprobs > max_top_logprobs) {
    return error(errc::invalid_argument,
                 "prompt_logprobs " + std::to_string(options.prompt_logprobs) + " is not in [-1, " +
                     std::to_string(max_top_logprobs) + "]");
  }
  const int needed = static_cast<int>(prompt.size()) + options.max_tokens;
  if (static_cast<int>(prompt.size()) >= c.max_positions) {
    return error(errc::invalid_argument, "the prompt has " + std::to_string(prompt.size()) +
                                             " tokens; the model's context is " +
                                             std::to_string(c.max_positions));
  }
  if (blocks_for(std::min(needed, c.max_positions)) > pool_.capacity()) {
    return error(errc::resource_exhausted, "the request needs " + std::to_string(needed) +
                                               " tokens of KV cache; the engine has " +
                                               std::to_string(options_.kv_tokens));
  }
  auto seq = std::make_unique<sequence>();
  seq->id = next_id_++;
  seq->prompt_tokens = static_cast<int>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->options = options;
  seq->drafts = draft_window(options_.speculation);
  const int64_t id = seq->id;
  waiting_.push_back(std::move(seq));
  return id;
}

int engine::running() const {
  return static_cast<int>(active_.size());
}

void engine::admit_waiting() {
  while (!waiting_.empty() && static_cast<int>(active_.size()) < options_.max_running) {
    sequence& s = *waiting_.front();
    const int total = std::min(s.prompt_tokens + s.options.max_tokens, model_.config.max_positions);
    // Reserve the whole sequence up front: a running sequence never waits for memory.
    if (!pool_.allocate(blocks_for(total), s.blocks)) break;
    active_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

// Drafts a decoding sequence may feed: within the step's budget, the tokens it may still
// generate (a verify step yields up to one more than it drafts) and the model's context.
int engine::draft_limit(sequence& s, int budget) const {
  const int generated = static_cast<int>(s.generated.size());
  const int left = s.options.max_tokens - generated - 1;
  const int positions = model_.config.max_positions - 1 - s.computed;
  return std::max(0, std::min({s.drafts.take(), budget - 1, left, positions}));
}

// Adds the decoding sequences to the batch, each with its last token and the drafts its source
// proposed (asked once for all of them); returns the step budget they used.
int engine::add_decoding(std::vector<sequence*>& in_batch, std::vector<int>& fed) {
  int budget = options_.max_step_tokens;
  const auto decoding = std::count_if(active_.begin(), active_.end(), [](const auto& s) {
    return s->computed >= s->prompt_tokens;
  });
  bool drafting = options_.speculation.drafts_at(static_cast<int>(decoding));
  if (options_.speculation.enabled() && !drafting && decoding > 0)
    ++speculation_.batch_limited_steps;
  // Prompts still to prefill join this step's batch after the decoding sequences.
  const bool prefilling = std::any_of(active_.begin(), active_.end(),
                                      [](const auto& s) { return s->computed < s->prompt_tokens; });
  if (drafting && gate_ && decoding > 0 && !gate_->allow(static_cast<int>(decoding), !prefilling)) {
    drafting = false;
    ++speculation_.gated_steps;
  }
  std::vector<draft_sequence> asking;
  std::vector<size_t> slots;  // each asking sequence's place in the batch
  for (auto& s : active_) {
    if (s->computed < s->prompt_tokens || budget == 0) continue;
    // Budget is set aside for every draft allowed; what goes unproposed returns to prefill.
    const int limit = drafting ? draft_limit(*s, budget) : 0;
    if (limit > 0) {
      asking.push_back({s->id, &s->tokens, limit});
      slots.push_back(in_batch.size());
    }
    in_batch.push_back(s.get());
    fed.push_back(1);  // drafts count as computed only once accepted
    budget -= 1 + limit;
  }
  proposals_.assign(in_batch.size(), {});
  if (!asking.empty()) {
    std::vector<draft_proposal> proposed;
    drafts_->propose(asking, proposed);
    for (size_t k = 0; k < slots.size(); ++k)
      proposals_[slots[k]] = std::move(proposed[k]);
  }
  // The last accepted token and the drafts go in together, each with its logits row.
  for (size_t i = 0; i < in_batch.size(); ++i) {
    sequence& s = *in_batch[i];
    feed_.assign(1, s.tokens[static_cast<size_t>(s.computed)]);
    feed_.insert(feed_.end(), proposals_[i].tokens.begin(), proposals_[i].tokens.end());
    const int count = static_cast<int>(feed_.size());
    batch_.add_sequence(feed_.data(), count, s.computed, s.blocks.data(),
                        static_cast<int>(s.blocks.size()), count);
  }
  return batch_.tokens();
}

void engine::build_batch(std::vector<sequence*>& in_batch, std::vector<int>& fed) {
  batch_.clear();
  mixed_step_ = false;
  in_batch.clear();
  fed.clear();
  // Decoding sequences first: one token each (and its drafts) keeps inter-token latency flat.
  int budget = options_.max_step_tokens - add_decoding(in_batch, fed);
  // Then prefill chunks in arrival order with what is left of the budget.
  for (auto& s : active_) {
    if (s->computed >= s->prompt_tokens || budget <= 0) continue;
    const int chunk = std::min(budget, s->prompt_tokens - s->computed);
    const bool last = s->computed + chunk == s->prompt_tokens;
    // Prompt log-probabilities need every row of the chunk; sampling only the last one.
    const int rows = s->options.prompt_logprobs >= 0 ? chunk : last ? 1 : 0;
    batch_.add_sequence(&s->tokens[static_cast<size_t>(s->computed)], chunk, s->computed,
                        s->blocks.data(), static_cast<int>(s->blocks.size()), rows);
    in_batch.push_back(s.get());
    fed.push_back(chunk);
    budget -= chunk;
    mixed_step_ = true;
  }
}

// A draft model takes the prompt chunks this step prefilled, so that a sequence's first drafting
// step does not feed it its whole prompt: on the default pair that catch-up took 0.4 ms for a
// 64-token prompt, two plain steps, stalling every sequence decoding beside it. Not where no
// step would draft at the batch the prompts join: drafting would resume with a catch-up anyway.
void engine::follow_prefills(const std::vector<sequence*>& in_batch) {
  if (!drafts_ || in_batch.size() == proposals_.size()) return;
  const int batch = static_cast<int>(active_.size());
  if (!options_.speculation.drafts_at(batch) || (gate_ && !gate_->expects_drafting(batch))) return;
  // Prefill chunks follow the decoding sequences in the batch.
  prefilled_.clear();
  for (size_t i = proposals_.size(); i < in_batch.size(); ++i)
    prefilled_.push_back({in_batch[i]->id, &in_batch[i]->tokens, in_batch[i]->computed});
  drafts_->prefilled(prefilled_);
}

void engine::finish_step(const std::vector<sequence*>& in_batch, std::vector<token_event>& events) {
  const int vocab = model_.config.vocab_size;
  for (size_t i = 0; i < in_batch.size(); ++i) {
    sequence& s = *in_batch[i];
    const int seq = static_cast<int>(i);
    const int count = batch_.logits_count(seq);
    if (count == 0) continue;
    const float* rows =
        logits_.data() + static_cast<size_t>(batch_.logits_begin(seq)) * static_cast<size_t>(vocab);
    if (i >= proposals_.size() && s.options.prompt_logprobs >= 0) {
      // A prefill chunk with every row: the prompt's own tokens follow its rows, up to the last
      // prompt token, whose row chooses the first output token.
      const int start = s.computed - count;
      const int scored = std::min(count, s.prompt_tokens - 1 - start);
      append_prompt_logprobs(rows, scored, vocab, &s.tokens[static_cast<size_t>(start) + 1],
                             s.options.prompt_logprobs, s.prompt_logprobs);
      if (s.computed < s.prompt_tokens) continue;
      rows += static_cast<size_t>(count - 1) * static_cast<size_t>(vocab);
    }
    // Decoding sequences come first in the batch, each with its drafts in proposals_. A
    // prefill's last chunk drafts nothing.
    static const std::vector<int32_t> no_drafts;
    const std::vector<int32_t>& drafts = i < proposals_.size() ? proposals_[i].tokens : no_drafts;
    const logits_rules rules(s.options.sampling, s.tokens, static_cast<int>(s.generated.size()),
                             s.options.stop_ids);
    verified_tokens verified =
        verify_drafts(rows, vocab, s.options.sampling, static_cast<uint64_t>(s.generated.size()),
                      drafts, rules, s.options.top_logprobs);
    const std::vector<int32_t>& produced = verified.tokens;
    if (i < proposals_.size()) decoded_tokens_ += static_cast<int>(produced.size());
    speculation_.add(static_cast<int>(drafts.size()), static_cast<int>(produced.size()));
    s.drafts.record(options_.speculation, static_cast<int>(drafts.size()),
                    static_cast<int>(produced.size()) - 1);
    if (drafts_ && !drafts.empty()) drafts_->accepted(s.id, static_cast<int>(produced.size()) - 1);
    if (i < proposals_.size())
      speculation_.add_proposed(proposals_[i].computed, static_cast<int>(drafts.size()));
    // Calibration counts only the drafts verification just judged (confidence_head::calibrate).
    if (options_.confidence_head && i < proposals_.size()) {
      options_.confidence_head->calibrate(
          proposals_[i].features, static_cast<int>(produced.size()) - 1, speculation_.calibration);
    }
    if (options_.on_verified && i < proposals_.size())
      options_.on_verified(proposals_[i], static_cast<int>(produced.size()) - 1);
    // Accepted drafts already have their keys and values in the cache.
    s.computed += static_cast<int>(produced.size()) - 1;
    for (size_t t = 0; t < produced.size() && s.finished == finish_reason::none; ++t)
      append_token(
          s, produced[t], rows + t * static_cast<size_t>(vocab),
          verified.logprobs.empty() ? position_logprobs{} : std::move(verified.logprobs[t]),
          events);
  }
}

void engine::append_token(sequence& s, int32_t token, const float* row, position_logprobs logprobs,
                          std::vector<token_event>& events) {
  s.tokens.push_back(token);
  s.generated.push_back(token);
  if (s.options.keep_logits) s.logits.insert(s.logits.end(), row, row + model_.config.vocab_size);
  s.finished = finish_after(token, s.options.stop_ids, static_cast<int>(s.generated.size()),
                            s.options.max_tokens, static_cast<int>(s.tokens.size()),
                            model_.config.max_positions);
  events.push_back({s.id, token, s.finished, std::move(logprobs), {}});
  if (s.generated.size() == 1) events.back().prompt_logprobs = std::move(s.prompt_logprobs);
}

bool engine::step(std::vector<token_event>& events) {
  // Only the measured gate reads the step's time.
  const auto start =
      gate_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  admit_waiting();
  std::vector<sequence*> in_batch;
  std::vector<int> fed;
  build_batch(in_batch, fed);
  if (in_batch.empty()) return false;
  run_step(*model_.forward, *model_.experts, *kv_, ws_, batch_, logits_);
  for (size_t i = 0; i < in_batch.size(); ++i)
    in_batch[i]->computed += fed[i];
  follow_prefills(in_batch);
  decoded_tokens_ = 0;
  finish_step(in_batch, events);
  if (gate_) {
    // The whole step counts: the drafts' own forward, the verify rows and the sampling.
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    gate_->record(took.count(), decoded_tokens_, !mixed_step_);
  }
  // Retire finished sequences and give back their blocks.
  for (auto it = active_.begin(); it != active_.end();) {
    if ((*it)->finished != finish_reason::none) {
      retire(**it);
      done_.push_back(std::move(*it));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

// A sequence leaves the running batch: its KV blocks, and the draft source's state, go.
void engine::retire(sequence& s) {
  pool_.release_all(s.blocks);
  s.blocks.clear();
  if (drafts_) drafts_->release(s.id);
}

void engine::run_until_idle() {
  std::vector<token_event> events;
  while (step(events))
    events.clear();
}

status engine::cancel(int64_t request) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == request) {
      waiting_.erase(it);
      return ok_status();
    }
  }
  for (auto it = active_.begin(); it != active_.end(); ++it) {
    if ((*it)->id == request) {
      retire(**it);
      active_.erase(it);
      return ok_status();
    }
  }
  return error(errc::not_found,
               "request " + std::to_string(request) + " is not waiting or running");
}

status engine::release(int64_t request) {
  for (auto it = done_.begin(); it != done_.end(); ++it) {
    if ((*it)->id == request) {
      done_.erase(it);
      return ok_status();
    }
  }
  return error(errc::not_found, "request " + std::to_string(request) + " is not finished");
}

namespace {
template <class Seqs>
auto* find_seq(Seqs& seqs, int64_t id) {
  for (auto& s : seqs) {
    if (s->id == id) return s.get();
  }
  return static_cast<decltype(seqs.front().get())>(nullptr);
}
}  // namespace

const std::vector<int32_t>& engine::output(int64_t request) const {
  for (const auto* list : {&done_, &active_}) {
    if (auto* s = find_seq(*list, request)) return s->generated;
  }
  throw std::out_of_range("unknown request " + std::to_string(request));
}

const std::vector<float>& engine::kept_logits(int64_t request) const {
  for (const auto* list : {&done_, &active_}) {
    if (auto* s = find_seq(*list, request)) return s->logits;
  }
  throw std::out_of_range("unknown request " + std::to_string(request));
}

finish_reason engine::finished(int64_t request) const {
  for (const auto* list : {&done_, &active_}) {
    if (auto* s = find_seq(*list, request)) return s->finished;
  }
  return finish_reason::none;
}

}  // namespace brigade::model

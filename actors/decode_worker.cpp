#include "actors/decode_worker.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <map>

#include "actors/handoff_check.hpp"
#include "actors/kv_block_codec.hpp"
#include "actors/sender_check.hpp"
#include "actors/step_loop.hpp"
#include "common/log.hpp"
#include "kvcache/block_pool.hpp"
#include "model/confidence_head.hpp"
#include "model/draft_source.hpp"
#include "model/finish_rules.hpp"
#include "model/kv_layout.hpp"
#include "model/sampler.hpp"
#include "model/speculation.hpp"
#include "model/speculation_gate.hpp"

namespace brigade::actors {
namespace {

struct running_sequence {
  uint64_t request = 0;
  uint32_t attempt = 0;
  std::vector<int32_t> tokens;
  int computed = 0;  // tokens whose KV is stored
  std::vector<int32_t> blocks;
  generation_params params;  // as handed over
  int32_t next_index = 0;    // generation index of the next token
  int32_t produced = 0;      // tokens produced in this attempt (the handed-over one included)
  int32_t cached_tokens = 0;
  model::draft_window drafts;
  bool cancelled = false;
};

struct decode_state {
  std::shared_ptr<const model_context> ctx;
  decode_worker_config config;
  step_loop loop;
  std::map<uint64_t, running_sequence> seqs;
  std::vector<uint64_t> in_step;                 // requests of the step in flight, in batch order
  std::vector<model::draft_proposal> proposals;  // per request in_step: its drafts
  std::unique_ptr<model::draft_source> drafts;   // null while speculation is off
  std::shared_ptr<const model::confidence_head> head;  // the drafts' head; null without one
  model::speculation_stats speculation;
  std::unique_ptr<model::speculation_gate> gate;     // null: every step may draft
  std::chrono::steady_clock::time_point step_start;  // of the step in flight
  static inline const char* name = "decode_worker";
};

using decode_worker_impl = with_step_loop<decode_worker_actor>;
using decode_pointer = decode_worker_impl::stateful_pointer<decode_state>;

model::finish_reason finish_for(const running_sequence& s, int32_t token, int max_positions) {
  return model::finish_after(token, s.params.stop_ids, s.produced, s.params.max_tokens,
                             static_cast<int>(s.tokens.size()), max_positions);
}

// Frees a sequence's KV blocks and its draft state; the iterator is past it afterwards.
std::map<uint64_t, running_sequence>::iterator forget(
    decode_state& st, std::map<uint64_t, running_sequence>::iterator it) {
  st.loop.run.pool->release_all(it->second.blocks);
  if (st.drafts) st.drafts->release(static_cast<int64_t>(it->first));
  return st.seqs.erase(it);
}

void release(decode_state& st, uint64_t request) {
  auto it = st.seqs.find(request);
  if (it != st.seqs.end()) forget(st, it);
}

// Drops a sequence now, or at the end of the step that runs it.
void drop(decode_state& st, uint64_t request) {
  if (st.loop.busy) {
    st.seqs.at(request).cancelled = true;
  } else {
    release(st, request);
  }
}

// Takes a handed-over sequence: stores its KV and reports the token the prefill worker sampled.
result<bool> accept(decode_pointer self, kv_handoff& h) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  if (status valid = check_handoff(h, c, st.config.block_tokens); !valid) return valid.err();
  const int context = static_cast<int>(h.tokens.size());
  const int total = static_cast<int>(
      std::min<int64_t>(int64_t{context} + h.params.max_tokens - 1, c.max_positions));
  if (auto old = st.seqs.find(h.request); old != st.seqs.end()) {
    // The request ran here before and was re-dispatched: the old attempt's sequence goes, the
    // newer one takes its place (refused while the old one is in a step: the router retries).
    if (old->second.attempt >= h.attempt) {
      return error(errc::invalid_argument,
                   "attempt " + std::to_string(h.attempt) + " is older than the one running");
    }
    if (st.loop.busy) {
      old->second.cancelled = true;
      return error(errc::unavailable, "an older attempt of the request is in this step");
    }
    release(st, h.request);
  }
  if (static_cast<int>(st.seqs.size()) >= st.config.max_running) {
    return error(errc::resource_exhausted, st.config.name + " is running its maximum of " +
                                               std::to_string(st.config.max_running));
  }
  running_sequence s;
  if (!st.loop.run.pool->allocate(blocks_for(total, h.block_tokens), s.blocks)) {
    return error(errc::resource_exhausted, st.config.name + " has no free KV blocks");
  }
  kv_block_codec(*st.ctx->dev, *st.loop.run.kv)
      .unpack(h.kv.data(), s.blocks.data(),
              static_cast<size_t>(blocks_for(context - 1, h.block_tokens)));
  s.request = h.request;
  s.attempt = h.attempt;
  s.tokens = std::move(h.tokens);
  s.computed = context - 1;
  s.params = std::move(h.params);
  s.next_index = s.params.draw_offset + 1;
  s.produced = 1;
  s.cached_tokens = h.cached_tokens;
  s.drafts = model::draft_window(st.config.speculation);
  const model::finish_reason f = finish_for(s, s.tokens.back(), c.max_positions);
  token_update u{s.request, s.attempt,       s.params.draw_offset,  {s.tokens.back()},
                 f,         s.cached_tokens, std::move(h.logprobs), std::move(h.prompt_logprobs)};
  self->send(st.config.reports, std::vector<token_update>{u});
  if (f == model::finish_reason::none) {
    st.seqs.emplace(s.request, std::move(s));
  } else {
    st.loop.run.pool->release_all(s.blocks);
  }
  return true;
}

// The step's logits: each sequence keeps the drafts its samples confirm, and the router gets
// the tokens.
void step_done(decode_pointer self) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  const std::vector<float>& logits = st.loop.run.driver->logits();
  std::vector<token_update> updates;
  int produced_tokens = 0;
  size_t row = 0;  // each sequence has a row per fed token: its last one, then its drafts
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    const std::vector<int32_t>& drafts = st.proposals[i].tokens;
    const float* rows = logits.data() + row * static_cast<size_t>(c.vocab_size);
    row += 1 + drafts.size();
    auto it = st.seqs.find(st.in_step[i]);
    if (it == st.seqs.end()) continue;
    running_sequence& s = it->second;
    if (s.cancelled) {
      release(st, s.request);
      continue;
    }
    // The rows follow every token of the sequence: its last next_index ones were generated.
    const model::logits_rules rules(s.params.sampling, s.tokens, s.next_index, s.params.stop_ids);
    model::verified_tokens verified = model::verify_drafts(rows, c.vocab_size, s.params.sampling,
                                                           static_cast<uint64_t>(s.next_index),
                                                           drafts, rules, s.params.top_logprobs);
    const std::vector<int32_t>& produced = verified.tokens;
    produced_tokens += static_cast<int>(produced.size());
    st.speculation.add(static_cast<int>(drafts.size()), static_cast<int>(produced.size()));
    st.speculation.add_proposed(st.proposals[i].computed, static_cast<int>(drafts.size()));
    s.drafts.record(st.config.speculation, static_cast<int>(drafts.size()),
                    static_cast<int>(produced.size()) - 1);
    if (st.drafts && !drafts.empty()) {
      st.drafts->accepted(static_cast<int64_t>(s.request), static_cast<int>(produced.size()) - 1);
    }
    // Only drafts verification just judged count; a cancelled sequence's drafts (skipped above)
    // and drafts the head cut were never verified (confidence_head::calibrate).
    if (st.head) {
      st.head->calibrate(st.proposals[i].features, static_cast<int>(produced.size()) - 1,
                         st.speculation.calibration);
    }
    // The last token and the accepted drafts now have their keys and values stored.
    s.computed += static_cast<int>(produced.size());
    token_update u{
        s.request, s.attempt, s.next_index, {}, model::finish_reason::none, s.cached_tokens,
        {},        {}};
    for (size_t t = 0; t < produced.size() && u.finished == model::finish_reason::none; ++t) {
      s.tokens.push_back(produced[t]);
      s.produced += 1;
      u.tokens.push_back(produced[t]);
      if (s.params.top_logprobs >= 0) u.logprobs.push_back(std::move(verified.logprobs[t]));
      u.finished = finish_for(s, produced[t], c.max_positions);
    }
    s.next_index += static_cast<int32_t>(u.tokens.size());
    const bool ended = u.finished != model::finish_reason::none;
    updates.push_back(std::move(u));
    if (ended) release(st, s.request);
  }
  if (!updates.empty()) self->send(st.config.reports, std::move(updates));
  if (st.gate) {
    // From the drafts to the verified tokens: the expert shards' round trips count too.
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - st.step_start;
    st.gate->record(took.count(), produced_tokens);
  }
}

// The step's sequences go back to the router, which re-dispatches them.
void step_abandoned(decode_pointer self, const std::string& reason) {
  auto& st = self->state;
  for (uint64_t request : st.in_step) {
    auto it = st.seqs.find(request);
    if (it == st.seqs.end()) continue;
    self->send(st.config.reports, job_failed{request, it->second.attempt, reason, true});
    release(st, request);
  }
}

// Drafts a sequence may feed: a verify step yields up to one token more than it drafts, within
// the tokens the request may still produce and the model's context.
int draft_limit(const decode_state& st, running_sequence& s) {
  const int left = s.params.max_tokens - s.produced - 1;
  const int positions = st.ctx->config.max_positions - 1 - s.computed;
  return std::max(0, std::min({s.drafts.take(), left, positions}));
}

// The drafts of the sequences that may draft, asked of the source at once.
void propose_drafts(decode_state& st) {
  st.proposals.assign(st.in_step.size(), {});
  const bool drafting = st.config.speculation.drafts_at(static_cast<int>(st.seqs.size()));
  if (st.config.speculation.enabled() && !drafting && !st.seqs.empty()) {
    ++st.speculation.batch_limited_steps;
  }
  if (!drafting || !st.drafts || st.in_step.empty()) return;
  if (st.gate && !st.gate->allow(static_cast<int>(st.in_step.size()))) {
    ++st.speculation.gated_steps;
    return;
  }
  std::vector<model::draft_sequence> asking;
  std::vector<size_t> slots;  // each asking sequence's place in the batch
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    running_sequence& s = st.seqs.at(st.in_step[i]);
    const int limit = draft_limit(st, s);
    if (limit == 0) continue;
    asking.push_back({static_cast<int64_t>(s.request), &s.tokens, limit});
    slots.push_back(i);
  }
  if (asking.empty()) return;
  std::vector<model::draft_proposal> proposed;
  st.drafts->propose(asking, proposed);
  for (size_t k = 0; k < slots.size(); ++k)
    st.proposals[slots[k]] = std::move(proposed[k]);
}

// Every running sequence feeds its last token, and its drafts while the batch is small enough.
bool fill_batch(decode_pointer self) {
  auto& st = self->state;
  st.step_start = std::chrono::steady_clock::now();
  st.loop.batch.clear();
  st.in_step.clear();
  for (auto it = st.seqs.begin(); it != st.seqs.end();) {
    it = it->second.cancelled ? forget(st, it) : std::next(it);
  }
  for (const auto& [request, s] : st.seqs)
    st.in_step.push_back(request);
  propose_drafts(st);
  std::vector<int32_t> fed;
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    running_sequence& s = st.seqs.at(st.in_step[i]);
    const std::vector<int32_t>& drafts = st.proposals[i].tokens;
    fed.assign(1, s.tokens[static_cast<size_t>(s.computed)]);
    fed.insert(fed.end(), drafts.begin(), drafts.end());
    const int count = static_cast<int>(fed.size());
    st.loop.batch.add_sequence(fed.data(), count, s.computed, s.blocks.data(),
                               static_cast<int>(s.blocks.size()), count);
  }
  return !st.in_step.empty();
}

decode_status status_of(const decode_state& st) {
  decode_status out;
  out.load = loop_status(st.loop, st.config.name, "decode");
  out.load.in_flight = static_cast<int32_t>(st.seqs.size());
  out.free_kv_blocks = st.loop.run.pool->free_blocks();
  out.kv_blocks = st.loop.run.pool->capacity();
  out.step_ms_total = st.loop.total_ms;
  out.stalled = st.loop.experts.stalled;
  out.epoch = st.loop.experts.shards.layout.epoch();
  out.max_draft = st.config.speculation.max_draft;
  out.draft = st.config.speculation.draft;
  if (st.drafts) out.draft_weights = st.drafts->weight_format_name();
  if (st.drafts) out.draft_attention_window = st.drafts->attention_window();
  out.speculation = st.speculation;
  return out;
}

// The worker's draft source. A draft model was checked when the worker was spawned
// (role_spawner), so its weights are loaded already; were they to fail now, the worker drafts
// nothing rather than fail its sequences. A draft model runs with the confidence head kept in
// its directory when there is one (model/confidence_head.hpp), which then decides how many
// drafts to verify instead of the adaptive window; `head` is set to it, for calibration.
std::unique_ptr<model::draft_source> make_drafts(
    const model_context& ctx, decode_worker_config& config,
    std::shared_ptr<const model::confidence_head>& head) {
  std::shared_ptr<const model::loaded_model> weights;
  model::speculation_options speculation = config.speculation;
  if (speculation.enabled() && speculation.draft == model::draft_kind::model) {
    auto loaded = ctx.draft(speculation.draft_model);
    if (loaded) {
      weights = loaded.value();
      auto found = model::confidence_head::for_draft(speculation.draft_model, "");
      if (found) {
        head = found.value();
      } else {
        log::error(config.name, "drafts without a confidence head: " + found.err().message);
      }
    } else {
      log::error(config.name, "drafts nothing: " + loaded.err().message);
      speculation.draft = model::draft_kind::none;
    }
  }
  if (head) config.speculation.adaptive = false;
  // A draft forward takes every running sequence at once, and a context catches up in chunks
  // of as many tokens, one chunk a step: a prompt prefilled elsewhere reaches the draft here, and
  // catching eight long ones up at once would stall every sequence of the batch for that step.
  const model::draft_source_limits limits{config.kv_tokens, config.block_tokens,
                                          std::max(256, config.max_running), 256};
  return model::make_draft_source(speculation, std::move(weights), limits, head);
}

decode_worker_impl::behavior_type decode_behavior(decode_pointer self,
                                                  std::shared_ptr<const model_context> ctx,
                                                  decode_worker_config config, shard_set shards) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  step_hooks hooks;
  hooks.fill_batch = [self] { return fill_batch(self); };
  hooks.step_done = [self] { step_done(self); };
  hooks.step_abandoned = [self](const std::string& why) { step_abandoned(self, why); };
  hooks.has_work = [self] { return !self->state.seqs.empty(); };
  st.drafts = make_drafts(*st.ctx, st.config, st.head);
  if (st.drafts && st.config.speculation.measured_gate)
    st.gate = std::make_unique<model::speculation_gate>();
  // Every running sequence may feed its drafts after its last token.
  start_loop(self, st.ctx->config, st.config.name, st.config.layout_acks,
             st.config.stall_timeout_ms, std::move(shards),
             make_step_resources(*st.ctx, st.config.kv_tokens, st.config.block_tokens,
                                 st.config.max_running * (1 + st.config.speculation.max_draft),
                                 model::kv_element(st.config.kv_dtype)),
             std::move(hooks));
  return {
      [=](kv_handoff& h) -> caf::result<bool> {
        auto accepted = accept(self, h);
        if (!accepted) return caf::make_error(caf::sec::runtime_error, accepted.err().message);
        request_step(self);
        return true;
      },
      [=](cancel_atom, uint64_t request, uint32_t attempt) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), s.config.reports)) return;
        auto it = s.seqs.find(request);
        // A cancel of an earlier attempt never touches the request's newer one.
        if (it == s.seqs.end() || it->second.attempt > attempt) return;
        drop(s, request);
      },
      [=](shards_atom, shard_set& next) { on_shards(self, next, self->state.ctx->config); },
      [=](step_atom) { try_step(self); },
      [=](tick_atom, uint64_t step) { on_stall_timeout(self, step); },
      [=](guard_atom) { on_expert_guard(self, self->state.loop.experts); },
      [=](rebind_atom, generation_report_actor& reports, layout_ack_actor& acks) {
        auto& s = self->state;
        if (!rebind_supervisor(self, std::move(acks))) return;
        s.config.reports = std::move(reports);
        std::vector<uint64_t> running;
        for (auto& [request, seq] : s.seqs)
          running.push_back(request);
        for (uint64_t request : running)
          drop(s, request);
        log::info(s.config.name, "adopted again by its supervisor; dropped " +
                                     std::to_string(running.size()) +
                                     " sequences the router re-dispatched");
      },
      [=](status_atom) { return status_of(self->state); },
  };
}

}  // namespace

decode_worker_actor spawn_decode_worker(caf::actor_system& sys,
                                        std::shared_ptr<const model_context> ctx,
                                        decode_worker_config config, shard_set shards) {
  return sys.spawn<caf::detached>(decode_behavior, std::move(ctx), std::move(config),
                                  std::move(shards));
}

void register_decode_worker_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<decode_worker_config>("brigade::decode_worker_config");
  cfg.add_message_type<decode_status>("brigade::decode_status");
  cfg.add_message_type<decode_worker_actor>("brigade::decode_worker_actor");
  cfg.add_message_type<generation_report_actor>("brigade::generation_report_actor");
}

}  // namespace brigade::actors

#include "actors/decode_worker.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "actors/expert_dispatch.hpp"
#include "actors/handoff_check.hpp"
#include "actors/sender_check.hpp"
#include "actors/step_resources.hpp"
#include "common/log.hpp"
#include "kvcache/block_pool.hpp"
#include "model/sampler.hpp"
#include "model/speculation.hpp"
#include "model/step_batch.hpp"
#include "model/step_driver.hpp"
#include "model/workspace.hpp"

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
  expert_client experts;
  step_resources run;  // KV storage, block pool, workspace, step driver
  std::map<uint64_t, running_sequence> seqs;
  model::step_batch batch;
  std::vector<uint64_t> in_step;          // requests of the step in flight, in batch order
  std::vector<std::vector<int32_t>> fed;  // per request in_step: its last token, then its drafts
  model::speculation_stats speculation;
  bool busy = false;
  uint64_t step = 0;
  int64_t steps_done = 0;
  double last_ms = 0.0;
  double total_ms = 0.0;  // all steps, for mean step times
  std::chrono::steady_clock::time_point step_start;
  static inline const char* name = "decode_worker";
};

using decode_pointer = decode_worker_actor::stateful_pointer<decode_state>;

finish finish_for(const running_sequence& s, int32_t token, int max_positions) {
  const auto& stops = s.params.stop_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return finish::stop;
  if (s.produced >= s.params.max_tokens) return finish::length;
  if (static_cast<int>(s.tokens.size()) >= max_positions) return finish::context;
  return finish::none;
}

void release(decode_state& st, uint64_t request) {
  auto it = st.seqs.find(request);
  if (it == st.seqs.end()) return;
  st.run.pool->release_all(it->second.blocks);
  st.seqs.erase(it);
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
    if (st.busy) {
      old->second.cancelled = true;
      return error(errc::unavailable, "an older attempt of the request is in this step");
    }
    release(st, h.request);
  }
  if (static_cast<int>(st.seqs.size()) >= st.config.max_running) {
    return error(errc::resource_exhausted, st.config.name + " is running its maximum of " +
                                               std::to_string(st.config.max_running));
  }
  const int kv_blocks = blocks_for(context - 1, h.block_tokens);
  const size_t block_floats = static_cast<size_t>(h.block_tokens) * c.num_kv_heads * c.head_dim;
  running_sequence s;
  if (!st.run.pool->allocate(blocks_for(total, h.block_tokens), s.blocks)) {
    return error(errc::resource_exhausted, st.config.name + " has no free KV blocks");
  }
  const float* src = h.kv.data();
  for (int b = 0; b < kv_blocks; ++b) {
    for (int l = 0; l < c.num_layers; ++l) {
      st.ctx->dev->write_kv_block(*st.run.kv, l, s.blocks[static_cast<size_t>(b)], src,
                                  src + block_floats);
      src += 2 * block_floats;
    }
  }
  s.request = h.request;
  s.attempt = h.attempt;
  s.tokens = std::move(h.tokens);
  s.computed = context - 1;
  s.params = std::move(h.params);
  s.next_index = s.params.draw_offset + 1;
  s.produced = 1;
  s.cached_tokens = h.cached_tokens;
  s.drafts = model::draft_window(st.config.speculation);
  const finish f = finish_for(s, s.tokens.back(), c.max_positions);
  token_update u{
      s.request,      s.attempt, s.params.draw_offset, {s.tokens.back()}, static_cast<int32_t>(f),
      s.cached_tokens};
  self->send(st.config.router, std::vector<token_update>{u});
  if (f == finish::none) {
    st.seqs.emplace(s.request, std::move(s));
  } else {
    st.run.pool->release_all(s.blocks);
  }
  return true;
}

void continue_step(decode_pointer self);

void finish_step(decode_pointer self) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  const std::vector<float>& logits = st.run.driver->logits();
  std::vector<token_update> updates;
  size_t row = 0;  // each sequence has a row per fed token
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    const std::vector<int32_t>& fed = st.fed[i];
    const float* rows = logits.data() + row * static_cast<size_t>(c.vocab_size);
    row += fed.size();
    auto it = st.seqs.find(st.in_step[i]);
    if (it == st.seqs.end()) continue;
    running_sequence& s = it->second;
    if (s.cancelled) {
      release(st, s.request);
      continue;
    }
    const std::vector<int32_t> drafts(fed.begin() + 1, fed.end());
    const std::vector<int32_t> produced = model::verify_drafts(
        rows, c.vocab_size, s.params.sampling, static_cast<uint64_t>(s.next_index), drafts);
    st.speculation.add(static_cast<int>(drafts.size()), static_cast<int>(produced.size()));
    s.drafts.record(st.config.speculation, static_cast<int>(drafts.size()),
                    static_cast<int>(produced.size()) - 1);
    // The last token and the accepted drafts now have their keys and values stored.
    s.computed += static_cast<int>(produced.size());
    token_update u{s.request, s.attempt, s.next_index, {}, 0, s.cached_tokens};
    finish f = finish::none;
    for (size_t t = 0; t < produced.size() && f == finish::none; ++t) {
      s.tokens.push_back(produced[t]);
      s.produced += 1;
      u.tokens.push_back(produced[t]);
      f = finish_for(s, produced[t], c.max_positions);
    }
    u.finished = static_cast<int32_t>(f);
    s.next_index += static_cast<int32_t>(u.tokens.size());
    updates.push_back(std::move(u));
    if (f != finish::none) release(st, s.request);
  }
  if (!updates.empty()) self->send(st.config.router, std::move(updates));
  st.busy = false;
  apply_pending_layout(self, st.experts);
  ++st.steps_done;
  st.last_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - st.step_start)
          .count();
  st.total_ms += st.last_ms;
  if (!st.seqs.empty()) self->send(self, step_atom_v);
}

// The step's sequences go back to the router, which re-dispatches them.
void abandon_step(decode_pointer self, const std::string& reason) {
  auto& st = self->state;
  for (uint64_t request : st.in_step) {
    auto it = st.seqs.find(request);
    if (it == st.seqs.end()) continue;
    self->send(st.config.router, job_failed{request, it->second.attempt, reason, true});
    release(st, request);
  }
  st.busy = false;
  st.experts.stalled = false;
  apply_pending_layout(self, st.experts);
  ++st.step;  // late expert answers of this step are ignored
  if (!st.seqs.empty()) self->send(self, step_atom_v);
}

void dispatch(decode_pointer self) {
  auto& st = self->state;
  dispatch_layer(
      self, st.experts, *st.run.driver, st.step, &st.step, [self] { continue_step(self); },
      [self] { dispatch(self); });
}

void continue_step(decode_pointer self) {
  auto& st = self->state;
  if (st.run.driver->advance() == model::step_driver::state::need_experts) return dispatch(self);
  finish_step(self);
}

// Drafts a sequence may feed: a verify step yields up to one token more than it drafts, within
// the tokens the request may still produce and the model's context.
int draft_limit(const decode_state& st, running_sequence& s) {
  const int left = s.params.max_tokens - s.produced - 1;
  const int positions = st.ctx->config.max_positions - 1 - s.computed;
  return std::max(0, std::min({s.drafts.take(), left, positions}));
}

void start_step(decode_pointer self) {
  auto& st = self->state;
  if (st.busy || st.seqs.empty() || st.experts.shards.shards.empty()) return;
  st.batch.clear();
  st.in_step.clear();
  st.fed.clear();
  const auto decoding = std::count_if(st.seqs.begin(), st.seqs.end(),
                                      [](const auto& entry) { return !entry.second.cancelled; });
  const bool drafting = st.config.speculation.drafts_at(static_cast<int>(decoding));
  if (st.config.speculation.enabled() && !drafting) ++st.speculation.batch_limited_steps;
  for (auto& [request, s] : st.seqs) {
    if (s.cancelled) continue;
    const int limit = drafting ? draft_limit(st, s) : 0;
    std::vector<int32_t> fed =
        model::tokens_to_feed(s.tokens, s.computed, limit, st.config.speculation);
    const int count = static_cast<int>(fed.size());
    st.batch.add_sequence(fed.data(), count, s.computed, s.blocks.data(),
                          static_cast<int>(s.blocks.size()), count);
    st.in_step.push_back(request);
    st.fed.push_back(std::move(fed));
  }
  for (auto it = st.seqs.begin(); it != st.seqs.end();) {
    if (it->second.cancelled) {
      st.run.pool->release_all(it->second.blocks);
      it = st.seqs.erase(it);
    } else {
      ++it;
    }
  }
  if (st.in_step.empty()) return;
  st.busy = true;
  ++st.step;
  st.step_start = std::chrono::steady_clock::now();
  st.run.driver->start(st.batch);
  continue_step(self);
}

nlohmann::json speculation_json(const decode_state& st) {
  const model::speculation_stats& x = st.speculation;
  return {{"max_draft", st.config.speculation.max_draft},
          {"verify_steps", x.verify_steps},
          {"drafted_tokens", x.drafted_tokens},
          {"accepted_tokens", x.accepted_tokens},
          {"emitted_tokens", x.emitted_tokens},
          {"batch_limited_steps", x.batch_limited_steps}};
}

decode_worker_actor::behavior_type decode_behavior(decode_pointer self,
                                                   std::shared_ptr<const model_context> ctx,
                                                   decode_worker_config config, shard_set shards) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  st.experts.owner = st.config.name;
  st.experts.acks = st.config.layout_acks;
  st.experts.stall_timeout = std::chrono::milliseconds(st.config.stall_timeout_ms);
  adopt_shards(self, st.experts, std::move(shards));
  // Every running sequence may feed its drafts after its last token.
  st.run = make_step_resources(*st.ctx, st.config.kv_tokens, st.config.block_tokens,
                               st.config.max_running * (1 + st.config.speculation.max_draft));
  return {
      [=](kv_handoff& h) -> caf::result<bool> {
        auto accepted = accept(self, h);
        if (!accepted) return caf::make_error(caf::sec::runtime_error, accepted.err().message);
        self->send(self, step_atom_v);
        return true;
      },
      [=](cancel_atom, uint64_t request, uint32_t attempt) {
        auto& s = self->state;
        if (s.config.router && !sent_by(self->current_sender(), s.config.router)) return;
        auto it = s.seqs.find(request);
        // A cancel of an earlier attempt never touches the request's newer one.
        if (it == s.seqs.end() || it->second.attempt > attempt) return;
        if (s.busy) {
          it->second.cancelled = true;  // dropped when the step ends
        } else {
          release(s, request);
        }
      },
      [=](shards_atom, shard_set& next) {
        auto& s = self->state;
        if (!acceptable_shards(self, s.experts, next, s.ctx->config)) return;
        if (receive_shards(self, s.experts, std::move(next), s.busy)) dispatch(self);
      },
      [=](step_atom) { start_step(self); },
      [=](tick_atom, uint64_t step) {
        auto& s = self->state;
        if (s.experts.stalled && s.step == step) abandon_step(self, "expert shard unavailable");
      },
      [=](rebind_atom, router_actor& router, layout_ack_actor& acks) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), s.config.layout_acks)) return;
        s.config.router = std::move(router);
        s.config.layout_acks = acks;
        s.experts.acks = std::move(acks);
        std::vector<uint64_t> running;
        for (auto& [request, seq] : s.seqs)
          running.push_back(request);
        for (uint64_t request : running) {
          if (s.busy) {
            s.seqs.at(request).cancelled = true;  // dropped when the step ends
          } else {
            release(s, request);
          }
        }
        log::info(s.config.name, "adopted again by its supervisor; dropped " +
                                     std::to_string(running.size()) +
                                     " sequences the router re-dispatched");
      },
      [=](status_atom) {
        const auto& s = self->state;
        role_status out;
        out.name = s.config.name;
        out.role = "decode";
        out.in_flight = static_cast<int32_t>(s.seqs.size());
        out.last_step_ms = s.last_ms;
        out.steps = s.steps_done;
        out.detail =
            nlohmann::json{
                {"free_kv_blocks", s.run.pool->free_blocks()}, {"step_ms_total", s.total_ms},
                {"kv_blocks", s.run.pool->capacity()},         {"stalled", s.experts.stalled},
                {"epoch", s.experts.shards.layout.epoch},      {"speculation", speculation_json(s)}}
                .dump();
        return out;
      },
  };
}

}  // namespace

decode_worker_actor spawn_decode_worker(caf::actor_system& sys,
                                        std::shared_ptr<const model_context> ctx,
                                        decode_worker_config config, shard_set shards) {
  return sys.spawn<caf::detached>(decode_behavior, std::move(ctx), std::move(config),
                                  std::move(shards));
}

}  // namespace brigade::actors

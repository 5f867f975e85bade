#include "actors/prefill_worker.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>

#include "actors/expert_dispatch.hpp"
#include "actors/remote_link.hpp"
#include "common/log.hpp"
#include "kvcache/block_pool.hpp"
#include "model/sampler.hpp"
#include "model/step_batch.hpp"
#include "model/step_driver.hpp"
#include "model/workspace.hpp"

namespace brigade::actors {
namespace {

struct active_job {
  prefill_job job;
  std::vector<int32_t> blocks;
  int computed = 0;
  bool cancelled = false;
};

struct prefill_state {
  std::shared_ptr<const model_context> ctx;
  prefill_worker_config config;
  expert_client experts;
  std::unique_ptr<gpu::kv_storage> kv;
  std::unique_ptr<kvcache::block_pool> pool;
  std::unique_ptr<model::workspace> ws;
  std::unique_ptr<model::step_driver> driver;
  std::deque<prefill_job> queue;
  std::deque<active_job> active;
  model::step_batch batch;
  std::vector<std::pair<uint64_t, int>> in_step;  // (request, tokens fed) in batch order
  bool busy = false;
  uint64_t step = 0;
  int64_t steps_done = 0;
  int64_t tokens_done = 0;
  double last_ms = 0.0;
  std::chrono::steady_clock::time_point step_start;
  static inline const char* name = "prefill_worker";
};

using prefill_pointer = prefill_worker_actor::stateful_pointer<prefill_state>;

int blocks_for(int tokens, int block_tokens) { return (tokens + block_tokens - 1) / block_tokens; }

active_job* find_active(prefill_state& st, uint64_t request) {
  for (auto& a : st.active) {
    if (a.job.request == request) return &a;
  }
  return nullptr;
}

void fail(prefill_pointer self, const prefill_job& job, const std::string& reason, bool retry) {
  self->send(job.router, job_failed{job.request, job.attempt, reason, retry});
}

// Moves queued jobs to active while their whole prompt fits in free KV blocks.
void admit(prefill_pointer self) {
  auto& st = self->state;
  while (!st.queue.empty()) {
    prefill_job& job = st.queue.front();
    const int needed = blocks_for(static_cast<int>(job.tokens.size()), st.config.block_tokens);
    if (needed > st.pool->capacity()) {
      fail(self, job, "the prompt needs more KV than a prefill worker holds", false);
      st.queue.pop_front();
      continue;
    }
    active_job a;
    if (!st.pool->allocate(needed, a.blocks)) break;
    a.job = std::move(job);
    st.queue.pop_front();
    st.active.push_back(std::move(a));
  }
}

// Samples the first token, packs the KV blocks and sends both to the decode worker.
void hand_off(prefill_pointer self, active_job& a, const float* logits_row) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  kv_handoff h;
  h.request = a.job.request;
  h.attempt = a.job.attempt;
  h.block_tokens = st.config.block_tokens;
  const int kv_blocks = blocks_for(static_cast<int>(a.job.tokens.size()), h.block_tokens);
  const size_t block_floats = static_cast<size_t>(h.block_tokens) * c.num_kv_heads * c.head_dim;
  std::vector<float> kv(static_cast<size_t>(kv_blocks) * c.num_layers * 2 * block_floats);
  float* dst = kv.data();
  for (int b = 0; b < kv_blocks; ++b) {
    for (int l = 0; l < c.num_layers; ++l) {
      st.ctx->dev->read_kv_block(*st.kv, l, a.blocks[static_cast<size_t>(b)], dst,
                                 dst + block_floats);
      dst += 2 * block_floats;
    }
  }
  h.kv = shared_floats::adopt(std::move(kv));
  const int32_t first = model::sample(logits_row, c.vocab_size, a.job.params.sampling,
                                      static_cast<uint64_t>(a.job.params.draw_offset));
  h.tokens = a.job.tokens;
  h.tokens.push_back(first);
  h.params = a.job.params;
  prefill_job job = a.job;
  job.tokens.clear();
  // A decode worker on another node gets the blocks over the data plane.
  decode_worker_actor target = a.job.decode;
  if (remote_link* link = remote_link::current()) target = link->local_view(target);
  self->request(target, std::chrono::seconds(30), std::move(h))
      .then([](bool) {},
            [self, job](caf::error& err) {
              fail(self, job, "decode worker refused the sequence: " + to_string(err), true);
            });
}

void continue_step(prefill_pointer self);

void finish_step(prefill_pointer self) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  const std::vector<float>& logits = st.driver->logits();
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    active_job* a = find_active(st, st.in_step[i].first);
    if (!a) continue;
    a->computed += st.in_step[i].second;
    st.tokens_done += st.in_step[i].second;
    const int seq = static_cast<int>(i);
    if (!a->cancelled && st.batch.logits_count(seq) > 0) {
      hand_off(self, *a, logits.data() + static_cast<size_t>(st.batch.logits_begin(seq)) *
                                             static_cast<size_t>(c.vocab_size));
    }
  }
  // Jobs handed off or cancelled give their blocks back.
  for (auto it = st.active.begin(); it != st.active.end();) {
    if (it->cancelled || it->computed == static_cast<int>(it->job.tokens.size())) {
      st.pool->release_all(it->blocks);
      it = st.active.erase(it);
    } else {
      ++it;
    }
  }
  st.busy = false;
  apply_pending_layout(self, st.experts);
  ++st.steps_done;
  st.last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                         st.step_start)
                   .count();
  if (!st.active.empty() || !st.queue.empty()) self->send(self, step_atom_v);
}

void abandon_step(prefill_pointer self, const std::string& reason) {
  auto& st = self->state;
  for (const auto& [request, fed] : st.in_step) {
    if (active_job* a = find_active(st, request)) {
      fail(self, a->job, reason, true);
      a->cancelled = true;
    }
  }
  for (auto it = st.active.begin(); it != st.active.end();) {
    if (it->cancelled) {
      st.pool->release_all(it->blocks);
      it = st.active.erase(it);
    } else {
      ++it;
    }
  }
  st.busy = false;
  st.experts.stalled = false;
  apply_pending_layout(self, st.experts);
  ++st.step;
  if (!st.active.empty() || !st.queue.empty()) self->send(self, step_atom_v);
}

void dispatch(prefill_pointer self) {
  auto& st = self->state;
  dispatch_layer(self, st.experts, *st.driver, st.step, &st.step,
                 [self] { continue_step(self); });
}

void continue_step(prefill_pointer self) {
  auto& st = self->state;
  if (st.driver->advance() == model::step_driver::state::need_experts) return dispatch(self);
  finish_step(self);
}

void start_step(prefill_pointer self) {
  auto& st = self->state;
  if (st.busy || st.experts.shards.shards.empty()) return;
  admit(self);
  st.batch.clear();
  st.in_step.clear();
  int budget = st.config.max_step_tokens;
  for (auto& a : st.active) {
    if (a.cancelled || budget == 0) continue;
    const int total = static_cast<int>(a.job.tokens.size());
    const int chunk = std::min(budget, total - a.computed);
    const bool last = a.computed + chunk == total;
    st.batch.add_sequence(&a.job.tokens[static_cast<size_t>(a.computed)], chunk, a.computed,
                          a.blocks.data(), static_cast<int>(a.blocks.size()), last ? 1 : 0);
    st.in_step.emplace_back(a.job.request, chunk);
    budget -= chunk;
  }
  if (st.in_step.empty()) return;
  st.busy = true;
  ++st.step;
  st.step_start = std::chrono::steady_clock::now();
  st.driver->start(st.batch);
  continue_step(self);
}

prefill_worker_actor::behavior_type prefill_behavior(prefill_pointer self,
                                                     std::shared_ptr<const model_context> ctx,
                                                     prefill_worker_config config,
                                                     shard_set shards) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  st.experts.owner = st.config.name;
  st.experts.acks = st.config.layout_acks;
  st.experts.stall_timeout = std::chrono::milliseconds(st.config.stall_timeout_ms);
  adopt_shards(self, st.experts, std::move(shards));
  const auto& c = st.ctx->config;
  gpu::kv_layout layout;
  layout.layers = c.num_layers;
  layout.blocks = blocks_for(st.config.kv_tokens, st.config.block_tokens);
  layout.block_tokens = st.config.block_tokens;
  layout.kv_heads = c.num_kv_heads;
  layout.head_dim = c.head_dim;
  st.kv = st.ctx->dev->make_kv(layout);
  st.pool = std::make_unique<kvcache::block_pool>(layout.blocks);
  st.ws = std::make_unique<model::workspace>(c, *st.ctx->dev, st.config.max_step_tokens);
  st.driver = std::make_unique<model::step_driver>(*st.ctx->forward, *st.kv, *st.ws);
  return {
      [=](prefill_job& job) {
        auto& s = self->state;
        if (static_cast<int>(s.queue.size()) >= s.config.max_queue) {
          return fail(self, job, s.config.name + " queue is full", true);
        }
        s.queue.push_back(std::move(job));
        self->send(self, step_atom_v);
      },
      [=](cancel_atom, uint64_t request) {
        auto& s = self->state;
        for (auto it = s.queue.begin(); it != s.queue.end(); ++it) {
          if (it->request == request) {
            s.queue.erase(it);
            return;
          }
        }
        if (active_job* a = find_active(s, request)) a->cancelled = true;
      },
      [=](shards_atom, shard_set& next) {
        auto& s = self->state;
        if (receive_shards(self, s.experts, std::move(next), s.busy)) return dispatch(self);
        self->send(self, step_atom_v);
      },
      [=](step_atom) { start_step(self); },
      [=](tick_atom, uint64_t step) {
        auto& s = self->state;
        if (s.experts.stalled && s.step == step) abandon_step(self, "expert shard unavailable");
      },
      [=](status_atom) {
        const auto& s = self->state;
        role_status out;
        out.name = s.config.name;
        out.role = "prefill";
        out.queue_depth = static_cast<int32_t>(s.queue.size());
        out.in_flight = static_cast<int32_t>(s.active.size());
        out.last_step_ms = s.last_ms;
        out.steps = s.steps_done;
        out.detail = nlohmann::json{{"tokens_prefilled", s.tokens_done},
                                    {"free_kv_blocks", s.pool->free_blocks()},
                                    {"stalled", s.experts.stalled},
                                    {"epoch", s.experts.shards.layout.epoch}}
                         .dump();
        return out;
      },
  };
}

}  // namespace

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys,
                                          std::shared_ptr<const model_context> ctx,
                                          prefill_worker_config config, shard_set shards) {
  return sys.spawn<caf::detached>(prefill_behavior, std::move(ctx), std::move(config),
                                  std::move(shards));
}

}  // namespace brigade::actors

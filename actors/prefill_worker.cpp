#include "actors/prefill_worker.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <optional>

#include "actors/cache_report.hpp"
#include "actors/handoff_check.hpp"
#include "actors/kv_block_codec.hpp"
#include "actors/prefix_cache.hpp"
#include "actors/remote_link.hpp"
#include "actors/retention_table.hpp"
#include "actors/sender_check.hpp"
#include "actors/step_loop.hpp"
#include "common/log.hpp"
#include "kvcache/block_pool.hpp"
#include "model/finish_rules.hpp"
#include "model/kv_layout.hpp"
#include "model/sampler.hpp"

namespace brigade::actors {
namespace {

struct active_job {
  prefill_job job;
  std::vector<int32_t> blocks;
  int computed = 0;
  bool cancelled = false;
  job_prefix prefix;  // its part in the prefix cache
  // The prompt's log-probabilities so far, when the job asks for them.
  std::vector<model::position_logprobs> prompt_logprobs;
};

// The queue's first job while it is admitted: its pooled prefix is pinned, and it may wait for
// the KV store's answer and then for free blocks.
struct admitting_job {
  prefill_job job;
  std::vector<int32_t> blocks;
  job_prefix prefix;
  bool store_asked = false;
  bool store_pending = false;
  std::chrono::steady_clock::time_point asked_at;
  kv_found fetched;
};

// How long a step waits for a KV store answer that is on its way. Jobs that arrive together are
// admitted one after another, each after its store answer (well under a millisecond from host
// memory); without the wait each would run in a step of its own.
constexpr auto store_answer_wait = std::chrono::milliseconds(2);

// The prefix cache and what the worker reports about it.
struct cache_state {
  kvcache::retention retention;
  std::unique_ptr<prefix_cache> cache;
  std::optional<admitting_job> front;
  prefill_cache_report report;  // unsent changes
  int64_t prompt_tokens = 0;
  int64_t hit_tokens[3] = {0, 0, 0};  // pool, host, ssd
  int64_t demotion_batches = 0;       // kv_demotion messages sent
  // Reference counts checked after every change: a debugging aid, O(pool blocks) each time, on
  // while the environment sets BRIGADE_CHECK_CACHE (the tests do).
  bool check_invariants = false;
  int64_t invariant_checks = 0;
  int64_t invariant_violations = 0;
  std::string first_violation;
};

struct prefill_state {
  std::shared_ptr<const model_context> ctx;
  prefill_worker_config config;
  step_loop loop;
  std::deque<prefill_job> queue;
  std::deque<active_job> active;
  std::vector<std::pair<uint64_t, int>> in_step;  // (request, tokens fed) in batch order
  cache_state cached;
  int64_t tokens_done = 0;
  static inline const char* name = "prefill_worker";
};

using prefill_worker_impl = with_step_loop<prefill_worker_actor>;
using prefill_pointer = prefill_worker_impl::stateful_pointer<prefill_state>;

active_job* find_active(prefill_state& st, uint64_t request) {
  for (auto& a : st.active) {
    if (a.job.request == request) return &a;
  }
  return nullptr;
}

void fail(prefill_pointer self, const prefill_job& job, const std::string& reason, bool retry) {
  self->send(self->state.config.reports, job_failed{job.request, job.attempt, reason, retry});
}

// Gives a job's blocks back, and its references to the prefix cache.
void release_job(prefill_state& st, job_prefix& prefix, std::vector<int32_t>& blocks,
                 int computed) {
  if (st.cached.cache) return st.cached.cache->finish(prefix, blocks, computed);
  st.loop.run.pool->release_all(blocks);
  blocks.clear();
}

// Between steps: cancelled jobs give their blocks back (a step in flight keeps them until it
// ends).
void drop_cancelled(prefill_state& st) {
  for (auto it = st.active.begin(); it != st.active.end();) {
    if (it->cancelled) {
      release_job(st, it->prefix, it->blocks, it->computed);
      it = st.active.erase(it);
    } else {
      ++it;
    }
  }
}

// Checks the cache's reference counts against every job holding blocks.
void check_cache(prefill_state& st, const std::string& where) {
  auto& cs = st.cached;
  std::vector<job_blocks> jobs;
  for (const auto& a : st.active)
    jobs.push_back({&a.prefix, &a.blocks});
  if (cs.front) jobs.push_back({&cs.front->prefix, &cs.front->blocks});
  ++cs.invariant_checks;
  status ok = cs.cache->check_invariants(jobs);
  if (ok) return;
  if (cs.invariant_violations++ == 0) cs.first_violation = where + ": " + ok.err().message;
  log::error(st.config.name, "prefix cache invariant broken " + where + ": " + ok.err().message);
}

// Sends the cache's changes to the router and its evicted blocks to the KV store.
void publish_cache(prefill_pointer self, const std::string& where) {
  auto& st = self->state;
  auto& cs = st.cached;
  if (!cs.cache) return;
  cs.cache->take_events(cs.report.hashes, cs.report.stored);
  std::vector<demoted_block> demoted = cs.cache->take_demotions();
  if (!demoted.empty() && st.config.cache.store) {
    kv_demotion d;
    for (auto& b : demoted) {
      d.hashes.push_back(b.hash);
      d.scenarios.push_back(b.scenario);
      d.bytes.insert(d.bytes.end(), b.bytes.begin(), b.bytes.end());
    }
    self->send(st.config.cache.store, std::move(d));
    ++cs.demotion_batches;
  }
  const bool changed = !cs.report.hashes.empty() || !cs.report.hits.empty();
  if (changed) {
    cs.report.worker = st.config.index;
    self->send(st.config.reports, std::move(cs.report));
  }
  cs.report = prefill_cache_report{};
  if (cs.check_invariants) check_cache(st, where);
}

// Asks the KV store for the admitted job's blocks after its pooled ones; the job waits for the
// answer (or its timeout) while the worker goes on stepping the others.
void ask_store(prefill_pointer self) {
  auto& st = self->state;
  admitting_job& a = *st.cached.front;
  a.store_asked = a.store_pending = true;
  a.asked_at = std::chrono::steady_clock::now();
  kv_lookup q;
  const auto& chain = a.prefix.chain;
  q.hashes.assign(chain.begin() + static_cast<std::ptrdiff_t>(a.prefix.held),
                  chain.begin() + static_cast<std::ptrdiff_t>(a.prefix.reusable));
  q.scenario = a.prefix.scenario;
  const uint64_t request = a.job.request;
  const uint32_t attempt = a.job.attempt;
  auto on_answer = [self, request, attempt](kv_found found) {
    auto& f = self->state.cached.front;
    if (!f || f->job.request != request || f->job.attempt != attempt || !f->store_pending) return;
    f->store_pending = false;
    f->fetched = std::move(found);
    request_step(self);
  };
  self->request(st.config.cache.store, st.config.cache.store_timeout, std::move(q))
      .then([on_answer](kv_found& found) { on_answer(std::move(found)); },
            [on_answer](caf::error&) { on_answer(kv_found{}); });
}

// Takes the queue's first job into admission, pinning its pooled prefix; false when none.
bool begin_admission(prefill_pointer self) {
  auto& st = self->state;
  auto& cs = st.cached;
  while (!st.queue.empty()) {
    prefill_job job = std::move(st.queue.front());
    st.queue.pop_front();
    const int needed = blocks_for(static_cast<int>(job.tokens.size()), st.config.block_tokens);
    if (needed > st.loop.run.pool->capacity()) {
      fail(self, job, "the prompt needs more KV than a prefill worker holds", false);
      continue;
    }
    admitting_job& a = cs.front.emplace();
    a.job = std::move(job);
    if (cs.cache) {
      const auto scenario =
          a.job.scenario < cs.retention.size() ? a.job.scenario : kvcache::retention::chat;
      cs.cache->begin(a.job.tokens, a.job.cache_salt, scenario, a.prefix);
      // A cached block holds KV but no logits: a job asking for the prompt's log-probabilities
      // computes every block (and still offers them to the cache).
      if (a.job.params.prompt_logprobs >= 0) a.prefix.reusable = 0;
      cs.cache->take_pooled(a.prefix, a.blocks);
    }
    return true;
  }
  return false;
}

// Whether another step has something to do. A job whose KV store answer came while a step ran
// is ready to admit, and nothing else would wake the worker for it.
bool has_work(const prefill_state& st) {
  const auto& front = st.cached.front;
  return !st.active.empty() || !st.queue.empty() || (front && !front->store_pending);
}

void record_hit(cache_state& cs, const admitting_job& a, int block_tokens) {
  prefix_hit h;
  h.request = a.job.request;
  h.attempt = a.job.attempt;
  h.scenario = a.prefix.scenario;
  h.prompt_tokens = static_cast<int32_t>(a.job.tokens.size());
  h.pool_tokens = a.prefix.pool_blocks * block_tokens;
  h.host_tokens = a.prefix.host_blocks * block_tokens;
  h.ssd_tokens = a.prefix.ssd_blocks * block_tokens;
  cs.prompt_tokens += h.prompt_tokens;
  cs.hit_tokens[0] += h.pool_tokens;
  cs.hit_tokens[1] += h.host_tokens;
  cs.hit_tokens[2] += h.ssd_tokens;
  cs.report.hits.push_back(h);
}

// Allocates the admitted job's other blocks, writes what the KV store sent into them and starts
// the job; false when the pool is short even after evicting cached blocks.
bool finish_admission(prefill_pointer self) {
  auto& st = self->state;
  auto& cs = st.cached;
  admitting_job& a = *cs.front;
  const int bt = st.config.block_tokens;
  const int fresh =
      blocks_for(static_cast<int>(a.job.tokens.size()), bt) - static_cast<int>(a.blocks.size());
  if (!(cs.cache ? cs.cache->allocate(fresh, a.blocks)
                 : st.loop.run.pool->allocate(fresh, a.blocks))) {
    return false;
  }
  if (cs.cache) {
    const kv_found& f = a.fetched;
    const bool usable = f.blocks > 0 && f.host_blocks >= 0 && f.ssd_blocks >= 0 &&
                        int64_t{f.host_blocks} + f.ssd_blocks == f.blocks &&
                        f.bytes.size() == static_cast<size_t>(f.blocks) * cs.cache->block_bytes() &&
                        a.prefix.held + static_cast<size_t>(f.blocks) <= a.prefix.reusable;
    if (usable) cs.cache->adopt_fetched(a.prefix, a.blocks, f.bytes, f.host_blocks, f.ssd_blocks);
    record_hit(cs, a, bt);
  }
  active_job j;
  j.job = std::move(a.job);
  j.blocks = std::move(a.blocks);
  j.prefix = std::move(a.prefix);
  j.computed = j.prefix.first_computed() * bt;
  st.active.push_back(std::move(j));
  cs.front.reset();
  return true;
}

// Admits queued jobs in order while their blocks fit, reusing what the cache holds.
void admit(prefill_pointer self) {
  auto& st = self->state;
  auto& cs = st.cached;
  if (cs.cache) cs.cache->expire();
  while (cs.front || begin_admission(self)) {
    admitting_job& a = *cs.front;
    if (a.store_pending) break;
    if (cs.cache && st.config.cache.store && !a.store_asked && a.prefix.held < a.prefix.reusable) {
      ask_store(self);
      break;
    }
    if (!finish_admission(self)) break;
  }
  publish_cache(self, "after admission");
}

// Drops the job being admitted if it is `request`.
bool cancel_admitting(prefill_pointer self, uint64_t request) {
  auto& st = self->state;
  auto& front = st.cached.front;
  if (!front || front->job.request != request) return false;
  release_job(st, front->prefix, front->blocks, 0);
  front.reset();
  publish_cache(self, "after a cancel");
  request_step(self);
  return true;
}

void init_cache(prefill_state& st) {
  const prefill_cache_config& c = st.config.cache;
  if (!c.enabled) return;
  auto& cs = st.cached;
  cs.retention = retention_table(c.scenarios);
  prefix_cache_config pc;
  pc.block_tokens = st.config.block_tokens;
  pc.capacity_blocks = c.capacity_blocks == 0 ? static_cast<size_t>(st.loop.run.pool->capacity())
                                              : c.capacity_blocks;
  pc.demote = static_cast<bool>(c.store);
  // A worker spawned on another node gets no clock (it does not cross processes): the system's.
  if (!c.clock) st.config.cache.clock = std::make_shared<const kvcache::system_clock>();
  cs.cache = std::make_unique<prefix_cache>(*st.loop.run.pool, *st.ctx->dev, *st.loop.run.kv,
                                            *st.ctx->block_hasher, pc, *st.config.cache.clock,
                                            cs.retention);
  const char* check = std::getenv("BRIGADE_CHECK_CACHE");
  cs.check_invariants = check && *check && std::string(check) != "0";
}

prefix_cache_status cache_status_of(const prefill_state& st) {
  const auto& cs = st.cached;
  prefix_cache_status out;
  if (!cs.cache) return out;
  const auto& index = cs.cache->index();
  out.enabled = true;
  out.cached_blocks = index.size();
  out.pinned_blocks = index.referenced();
  out.capacity_blocks = index.capacity();
  out.used_blocks = st.loop.run.pool->used_blocks();
  out.prompt_tokens = cs.prompt_tokens;
  out.pool_hit_tokens = cs.hit_tokens[0];
  out.host_hit_tokens = cs.hit_tokens[1];
  out.ssd_hit_tokens = cs.hit_tokens[2];
  out.admitting = cs.front.has_value();
  out.demotion_batches = cs.demotion_batches;
  out.invariant_checks = cs.invariant_checks;
  out.invariant_violations = cs.invariant_violations;
  out.first_violation = cs.first_violation;
  return out;
}

// Samples the first token, packs the KV blocks and sends both to the decode worker.
void hand_off(prefill_pointer self, active_job& a, const float* logits_row) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  kv_handoff h;
  h.request = a.job.request;
  h.attempt = a.job.attempt;
  h.block_tokens = st.config.block_tokens;
  h.cached_tokens = a.prefix.first_computed() * h.block_tokens;
  const generation_params& params = a.job.params;
  // The job's tokens end with the draw_offset tokens an earlier attempt generated.
  const model::logits_rules rules(params.sampling, a.job.tokens, params.draw_offset,
                                  params.stop_ids);
  std::vector<float> scratch;
  model::drawn_token drawn = model::draw_token(logits_row, c.vocab_size, params.sampling,
                                               static_cast<uint64_t>(params.draw_offset), rules,
                                               params.top_logprobs, scratch);
  const int32_t first = drawn.token;
  if (params.top_logprobs >= 0) h.logprobs.push_back(std::move(drawn.logprobs));
  // A generation that ends with its first token (max_tokens 1, a stop token, a full context)
  // finishes here: its KV never needs to move.
  const model::finish_reason ended =
      model::finish_after(first, params.stop_ids, 1, params.max_tokens,
                          static_cast<int>(a.job.tokens.size()) + 1, c.max_positions);
  if (ended != model::finish_reason::none) {
    token_update u{
        a.job.request, a.job.attempt,   params.draw_offset,    {first},
        ended,         h.cached_tokens, std::move(h.logprobs), std::move(a.prompt_logprobs)};
    self->send(st.config.reports, std::vector<token_update>{u});
    return;
  }
  const kv_block_codec codec(*st.ctx->dev, *st.loop.run.kv);
  const size_t kv_blocks =
      static_cast<size_t>(blocks_for(static_cast<int>(a.job.tokens.size()), h.block_tokens));
  std::vector<float> kv(kv_blocks * codec.block_floats());
  codec.pack(a.blocks.data(), kv_blocks, kv.data());
  h.kv = shared_floats::adopt(std::move(kv));
  h.tokens = a.job.tokens;
  h.tokens.push_back(first);
  h.params = params;
  h.prompt_logprobs = std::move(a.prompt_logprobs);
  prefill_job job = a.job;
  job.tokens.clear();
  // A decode worker on another node gets the blocks over the data plane.
  decode_worker_actor target = a.job.decode;
  if (remote_link* link = remote_link::current()) target = link->local_view(target);
  // Bounded by what moving the blocks can take (2 s, plus 10 ms per MiB): a hand-off lost on
  // the way fails the job soon, and the router dispatches it again.
  const auto wait = std::chrono::milliseconds(2000 + (h.kv.size() * sizeof(float) >> 20) * 10);
  self->request(target, wait, std::move(h))
      .then([](bool) {},
            [self, job](caf::error& err) {
              fail(self, job, "decode worker refused the sequence: " + to_string(err), true);
            });
}

// Gives back the blocks of jobs that are done (handed off) or cancelled.
void release_finished(prefill_state& st) {
  for (auto it = st.active.begin(); it != st.active.end();) {
    if (it->cancelled || it->computed == static_cast<int>(it->job.tokens.size())) {
      release_job(st, it->prefix, it->blocks, it->computed);
      it = st.active.erase(it);
    } else {
      ++it;
    }
  }
}

// The step's chunks are computed: cache their full blocks, and hand off the prompts that ended.
void step_done(prefill_pointer self) {
  auto& st = self->state;
  const auto& c = st.ctx->config;
  const std::vector<float>& logits = st.loop.run.driver->logits();
  for (size_t i = 0; i < st.in_step.size(); ++i) {
    active_job* a = find_active(st, st.in_step[i].first);
    if (!a) continue;
    a->computed += st.in_step[i].second;
    st.tokens_done += st.in_step[i].second;
    if (st.cached.cache) st.cached.cache->cache_computed(a->prefix, a->blocks, a->computed);
    const int seq = static_cast<int>(i);
    const int rows = st.loop.batch.logits_count(seq);
    if (a->cancelled || rows == 0) continue;
    const size_t vocab = static_cast<size_t>(c.vocab_size);
    const float* row = logits.data() + static_cast<size_t>(st.loop.batch.logits_begin(seq)) * vocab;
    if (a->job.params.prompt_logprobs >= 0) {
      // Every row of the chunk: each predicts the prompt's next token, up to the last one.
      const int start = a->computed - rows;
      const int scored = std::min(rows, static_cast<int>(a->job.tokens.size()) - 1 - start);
      model::append_prompt_logprobs(row, scored, c.vocab_size,
                                    &a->job.tokens[static_cast<size_t>(start) + 1],
                                    a->job.params.prompt_logprobs, a->prompt_logprobs);
      if (a->computed < static_cast<int>(a->job.tokens.size())) continue;
      row += static_cast<size_t>(rows - 1) * vocab;
    }
    hand_off(self, *a, row);
  }
  release_finished(st);
  publish_cache(self, "after a step");
}

void step_abandoned(prefill_pointer self, const std::string& reason) {
  auto& st = self->state;
  for (const auto& [request, fed] : st.in_step) {
    if (active_job* a = find_active(st, request)) {
      fail(self, a->job, reason, true);
      a->cancelled = true;
    }
  }
  drop_cancelled(st);
  publish_cache(self, "after an abandoned step");
}

// Admits what fits, then takes a chunk of each active prompt within the step's token budget.
bool fill_batch(prefill_pointer self) {
  auto& st = self->state;
  drop_cancelled(st);
  admit(self);
  const auto& front = st.cached.front;
  if (front && front->store_pending) {
    const auto waited = std::chrono::steady_clock::now() - front->asked_at;
    if (waited < store_answer_wait) {
      // The answer's arrival sends a step; this one is the fallback if it is slow.
      self->delayed_send(self, store_answer_wait - waited, step_atom_v);
      return false;
    }
  }
  st.loop.batch.clear();
  st.in_step.clear();
  int budget = st.config.max_step_tokens;
  for (auto& a : st.active) {
    if (a.cancelled || budget == 0) continue;
    const int total = static_cast<int>(a.job.tokens.size());
    const int chunk = std::min(budget, total - a.computed);
    const bool last = a.computed + chunk == total;
    // Prompt log-probabilities need every row of the chunk; sampling only the last one.
    const int rows = a.job.params.prompt_logprobs >= 0 ? chunk : last ? 1 : 0;
    st.loop.batch.add_sequence(&a.job.tokens[static_cast<size_t>(a.computed)], chunk, a.computed,
                               a.blocks.data(), static_cast<int>(a.blocks.size()), rows);
    st.in_step.emplace_back(a.job.request, chunk);
    if (st.cached.check_invariants && st.cached.cache) {
      status writable = st.cached.cache->check_writable(a.blocks, a.computed, chunk);
      if (!writable && st.cached.invariant_violations++ == 0) {
        st.cached.first_violation = writable.err().message;
      }
    }
    budget -= chunk;
  }
  return !st.in_step.empty();
}

prefill_status status_of(const prefill_state& st) {
  prefill_status out;
  out.load = loop_status(st.loop, st.config.name, "prefill");
  out.load.queue_depth = static_cast<int32_t>(st.queue.size() + (st.cached.front ? 1 : 0));
  out.load.in_flight = static_cast<int32_t>(st.active.size());
  out.tokens_prefilled = st.tokens_done;
  out.busy_s = st.loop.total_ms / 1000.0;
  out.free_kv_blocks = st.loop.run.pool->free_blocks();
  out.stalled = st.loop.experts.stalled;
  out.epoch = st.loop.experts.shards.layout.epoch();
  out.cache = cache_status_of(st);
  return out;
}

prefill_worker_impl::behavior_type prefill_behavior(prefill_pointer self,
                                                    std::shared_ptr<const model_context> ctx,
                                                    prefill_worker_config config,
                                                    shard_set shards) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  step_hooks hooks;
  hooks.fill_batch = [self] { return fill_batch(self); };
  hooks.step_done = [self] { step_done(self); };
  hooks.step_abandoned = [self](const std::string& why) { step_abandoned(self, why); };
  hooks.has_work = [self] { return has_work(self->state); };
  start_loop(self, st.ctx->config, st.config.name, st.config.layout_acks,
             st.config.stall_timeout_ms, std::move(shards),
             make_step_resources(*st.ctx, st.config.kv_tokens, st.config.block_tokens,
                                 st.config.max_step_tokens, model::kv_element(st.config.kv_dtype)),
             std::move(hooks));
  init_cache(st);
  return {
      [=](prefill_job& job) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), s.config.reports)) {
          return log::warn(s.config.name,
                           "ignored a prefill job that did not come from the router");
        }
        if (status ok = check_prefill_job(job, s.ctx->config); !ok) {
          log::warn(s.config.name, ok.err().message);
          return fail(self, job, ok.err().message, false);
        }
        if (static_cast<int>(s.queue.size()) >= s.config.max_queue) {
          return fail(self, job, s.config.name + " queue is full", true);
        }
        s.queue.push_back(std::move(job));
        request_step(self);
      },
      [=](cancel_atom, uint64_t request, uint32_t attempt) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), s.config.reports)) return;
        // A cancel of an earlier attempt never touches the request's newer one.
        for (auto it = s.queue.begin(); it != s.queue.end(); ++it) {
          if (it->request == request && it->attempt <= attempt) {
            s.queue.erase(it);
            return;
          }
        }
        if (s.cached.front && s.cached.front->job.request == request &&
            s.cached.front->job.attempt <= attempt && cancel_admitting(self, request)) {
          return;
        }
        if (active_job* a = find_active(s, request); a && a->job.attempt <= attempt) {
          a->cancelled = true;
          request_step(self);  // gives its blocks back if no step is running
        }
      },
      [=](shards_atom, shard_set& next) { on_shards(self, next, self->state.ctx->config); },
      [=](step_atom) { try_step(self); },
      [=](tick_atom, uint64_t step) { on_stall_timeout(self, step); },
      [=](guard_atom) { on_expert_guard(self, self->state.loop.experts); },
      [=](rebind_atom, prefill_report_actor& reports, layout_ack_actor& acks) {
        auto& s = self->state;
        if (!rebind_supervisor(self, std::move(acks))) return;
        s.config.reports = std::move(reports);
        const size_t dropped = s.queue.size() + s.active.size() + (s.cached.front ? 1 : 0);
        s.queue.clear();
        if (s.cached.front) cancel_admitting(self, s.cached.front->job.request);
        for (auto& a : s.active)
          a.cancelled = true;
        request_step(self);  // gives the cancelled jobs' blocks back
        log::info(s.config.name, "adopted again by its supervisor; dropped " +
                                     std::to_string(dropped) + " jobs the router re-dispatched");
      },
      [=](store_atom, kv_store_actor& store) {
        auto& s = self->state;
        // Only the supervisor names the store: blocks demoted to it hold users' KV.
        if (!sent_by(self->current_sender(), s.loop.experts.acks)) {
          return log::warn(s.config.name,
                           "ignored a KV store that did not come from the supervisor");
        }
        s.config.cache.store = std::move(store);
      },
      [=](status_atom) { return status_of(self->state); },
  };
}

}  // namespace

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys,
                                          std::shared_ptr<const model_context> ctx,
                                          prefill_worker_config config, shard_set shards) {
  return sys.spawn<caf::detached>(prefill_behavior, std::move(ctx), std::move(config),
                                  std::move(shards));
}

void register_prefill_worker_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<prefill_job>("brigade::prefill_job");
  cfg.add_message_type<prefill_worker_config>("brigade::prefill_worker_config");
  cfg.add_message_type<prefill_status>("brigade::prefill_status");
  cfg.add_message_type<prefill_worker_actor>("brigade::prefill_worker_actor");
  cfg.add_message_type<prefill_report_actor>("brigade::prefill_report_actor");
}

}  // namespace brigade::actors

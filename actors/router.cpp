#include "actors/router.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "actors/cache_usage.hpp"
#include "actors/decode_worker.hpp"
#include "actors/prefill_routing.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/sender_check.hpp"
#include "common/log.hpp"

namespace brigade::actors {
namespace {

using clock_type = std::chrono::steady_clock;

struct worker_slot {
  std::string name;
  std::string node;
  caf::actor handle;
  bool alive = false;
  bool suspected = false;  // its node's heartbeats are late
  int capacity = 0;
  int64_t load = 0;  // decode: sequences assigned; prefill: prompt tokens not yet prefilled
};

enum class phase { waiting, prefill, decode };

struct tracked_request {
  uint64_t id = 0;
  uint32_t attempt = 0;
  serve::generation_request req;
  std::shared_ptr<serve::generation_sink> sink;
  std::vector<int32_t> streamed;
  phase at = phase::waiting;
  int prefill = -1;
  int decode = -1;
  int64_t prefill_tokens = 0;
  int cached_tokens = 0;
  bool prompt_logprobs_sent = false;
  uint16_t scenario = 0;
  int attempts = 0;
  bool queued = false;  // in the waiting queue
  clock_type::time_point not_before{};
};

struct router_state {
  router_config config;
  std::vector<worker_slot> prefill;
  std::vector<worker_slot> decode;
  std::map<uint64_t, tracked_request> requests;
  std::map<int64_t, uint64_t> by_service_id;
  // The prefill worker of recent first attempts by service id, kept a while after they end: a
  // choice of the same answer may come after the first one finished (recent_prefill_kept).
  std::map<int64_t, int> recent_prefill;
  std::deque<int64_t> recent_order;
  std::deque<uint64_t> waiting;
  uint64_t next_id = 1;
  int64_t completed = 0;
  int64_t redispatched = 0;
  std::unique_ptr<prefill_routing> routing;
  std::unique_ptr<cache_usage> usage;
  int64_t cache_event_errors = 0;
  // Token updates and failures from actors that are not the request's workers: dropped.
  int64_t foreign_messages = 0;
  std::set<std::string> suspected_nodes;
  // Since when requests wait with no live worker of a kind they need.
  std::optional<clock_type::time_point> unserviceable_since;
  static inline const char* name = "router";
};

// Private: its own retry and no-worker timers.
using router_impl = router_actor::extend<caf::reacts_to<tick_atom>>;
using router_pointer = router_impl::stateful_pointer<router_state>;

// The live worker with the least load, on a node not suspected when there is one.
int pick(const std::vector<worker_slot>& slots, bool need_room) {
  int best = -1;
  auto key = [&](size_t i) { return std::make_pair(slots[i].suspected, slots[i].load); };
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (!s.alive || (need_room && s.load >= s.capacity)) continue;
    if (best < 0 || key(i) < key(static_cast<size_t>(best))) best = static_cast<int>(i);
  }
  return best;
}

// Gives back the worker load an attempt holds.
void release_workers(router_state& st, tracked_request& r) {
  if (r.at == phase::prefill && r.prefill >= 0) {
    st.prefill[static_cast<size_t>(r.prefill)].load -= r.prefill_tokens;
  }
  if (r.at != phase::waiting && r.decode >= 0) st.decode[static_cast<size_t>(r.decode)].load -= 1;
  r.prefill = r.decode = -1;
  r.at = phase::waiting;
}

void cancel_at_workers(router_pointer self, tracked_request& r) {
  auto& st = self->state;
  if (r.at == phase::prefill && r.prefill >= 0 &&
      st.prefill[static_cast<size_t>(r.prefill)].alive) {
    self->send(
        caf::actor_cast<prefill_worker_actor>(st.prefill[static_cast<size_t>(r.prefill)].handle),
        cancel_atom_v, r.id, r.attempt);
  }
  if (r.at != phase::waiting && r.decode >= 0 && st.decode[static_cast<size_t>(r.decode)].alive) {
    self->send(
        caf::actor_cast<decode_worker_actor>(st.decode[static_cast<size_t>(r.decode)].handle),
        cancel_atom_v, r.id, r.attempt);
  }
}

// The prefill worker for `tokens` by cache-aware routing among the live ones.
prefill_routing::choice place_prefill(router_state& st, const std::vector<int32_t>& tokens,
                                      const std::string& salt, int preferred) {
  std::vector<bool> alive;
  std::vector<int64_t> queued;
  for (const auto& w : st.prefill) {
    alive.push_back(w.alive);
    queued.push_back(w.load);
  }
  return st.routing->choose(tokens, salt, alive, queued, preferred);
}

constexpr size_t recent_prefill_kept = 4096;

// The prefill worker that computed the prompt `r` shares (an earlier choice of its answer), while
// it is remembered; -1 otherwise.
int shared_prompt_worker(const router_state& st, const tracked_request& r) {
  if (r.req.same_prompt_as == 0 || !r.streamed.empty()) return -1;
  auto it = st.recent_prefill.find(r.req.same_prompt_as);
  return it == st.recent_prefill.end() ? -1 : it->second;
}

void remember_prefill(router_state& st, int64_t service_id, int worker) {
  auto [it, added] = st.recent_prefill.try_emplace(service_id, worker);
  it->second = worker;  // a retried first attempt computes the prompt elsewhere
  if (added) st.recent_order.push_back(service_id);
  while (st.recent_order.size() > recent_prefill_kept) {
    st.recent_prefill.erase(st.recent_order.front());
    st.recent_order.pop_front();
  }
}

// Starts one attempt of `r`; false when no worker can take it now.
bool dispatch(router_pointer self, tracked_request& r) {
  auto& st = self->state;
  const int d = pick(st.decode, true);
  if (d < 0 || pick(st.prefill, false) < 0) return false;
  prefill_job job;
  job.tokens = r.req.prompt;
  job.tokens.insert(job.tokens.end(), r.streamed.begin(), r.streamed.end());
  const prefill_routing::choice placed =
      place_prefill(st, job.tokens, r.req.cache_salt, shared_prompt_worker(st, r));
  const int p = placed.worker;
  ++r.attempt;
  ++r.attempts;
  job.request = r.id;
  job.attempt = r.attempt;
  job.scenario = r.scenario;
  job.cache_salt = r.req.cache_salt;
  job.params.sampling = r.req.sampling;
  job.params.max_tokens = r.req.max_tokens - static_cast<int32_t>(r.streamed.size());
  job.params.draw_offset = static_cast<int32_t>(r.streamed.size());
  job.params.stop_ids = r.req.stop_ids;
  job.params.top_logprobs = r.req.top_logprobs;
  // Only a first attempt has the prompt alone to score; they reach the client once.
  job.params.prompt_logprobs =
      r.streamed.empty() && !r.prompt_logprobs_sent ? r.req.prompt_logprobs : -1;
  job.decode = caf::actor_cast<decode_worker_actor>(st.decode[static_cast<size_t>(d)].handle);
  r.prefill = p;
  r.decode = d;
  r.at = phase::prefill;
  if (r.streamed.empty()) remember_prefill(st, r.req.id, p);
  r.prefill_tokens = placed.uncached_tokens;
  st.prefill[static_cast<size_t>(p)].load += r.prefill_tokens;
  st.decode[static_cast<size_t>(d)].load += 1;
  self->send(caf::actor_cast<prefill_worker_actor>(st.prefill[static_cast<size_t>(p)].handle),
             std::move(job));
  return true;
}

// Dispatches waiting requests in order while workers have room.
void fail_request(router_pointer self, uint64_t id, const error& err);

bool any_alive(const std::vector<worker_slot>& group) {
  return std::any_of(group.begin(), group.end(), [](const worker_slot& w) { return w.alive; });
}

// Requests cannot wait for ever for a kind of worker that no longer runs anywhere (every node
// holding one is gone): after no_worker_timeout they fail with an error the client can act on.
// Returns true when the waiting requests were failed.
bool fail_if_unserviceable(router_pointer self, clock_type::time_point now) {
  auto& st = self->state;
  const bool serviceable = any_alive(st.decode) && any_alive(st.prefill);
  if (serviceable || st.waiting.empty()) {
    st.unserviceable_since.reset();
    return false;
  }
  if (!st.unserviceable_since) {
    st.unserviceable_since = now;
    self->delayed_send(self, st.config.no_worker_timeout, tick_atom_v);
    return false;
  }
  if (now - *st.unserviceable_since < st.config.no_worker_timeout) return false;
  const std::string missing = any_alive(st.decode) ? "prefill" : "decode";
  const auto waited_s =
      std::chrono::duration_cast<std::chrono::seconds>(st.config.no_worker_timeout).count();
  const std::vector<uint64_t> ids(st.waiting.begin(), st.waiting.end());
  log::error("router", "no " + missing + " worker has run for " + std::to_string(waited_s) +
                           " s: failing the " + std::to_string(ids.size()) + " waiting requests");
  for (uint64_t id : ids) {
    fail_request(self, id,
                 error(errc::unavailable, "no " + missing + " worker has been running for " +
                                              std::to_string(waited_s) +
                                              " s (the nodes holding them are gone); retry later"));
  }
  st.waiting.clear();
  st.unserviceable_since.reset();
  return true;
}

void pump(router_pointer self) {
  auto& st = self->state;
  const auto now = clock_type::now();
  if (fail_if_unserviceable(self, now)) return;
  bool deferred = false;
  for (auto it = st.waiting.begin(); it != st.waiting.end();) {
    auto r = st.requests.find(*it);
    if (r == st.requests.end()) {
      it = st.waiting.erase(it);
      continue;
    }
    if (r->second.not_before > now) {
      deferred = true;
      ++it;
      continue;
    }
    if (!dispatch(self, r->second)) break;
    r->second.queued = false;
    it = st.waiting.erase(it);
  }
  if (deferred) self->delayed_send(self, st.config.retry_backoff, tick_atom_v);
}

void fail_request(router_pointer self, uint64_t id, const error& err) {
  auto& st = self->state;
  auto it = st.requests.find(id);
  if (it == st.requests.end()) return;
  release_workers(st, it->second);
  it->second.sink->on_error(err);
  st.by_service_id.erase(it->second.req.id);
  st.requests.erase(it);
}

// Sends a request back to the waiting queue for another attempt, or fails it for good.
void redispatch(router_pointer self, tracked_request& r, const std::string& why) {
  auto& st = self->state;
  cancel_at_workers(self, r);
  release_workers(st, r);
  if (r.attempts >= st.config.max_attempts) {
    return fail_request(
        self, r.id,
        error(errc::unavailable,
              "request failed after " + std::to_string(r.attempts) + " attempts; last: " + why));
  }
  ++st.redispatched;
  log::info("router", "re-dispatching request " + std::to_string(r.id) + " after " +
                          std::to_string(r.streamed.size()) + " tokens: " + why);
  // Whatever the old attempt still sends (tokens, failures) is stale from now on.
  ++r.attempt;
  r.not_before = clock_type::now() + st.config.retry_backoff * std::max(1, r.attempts);
  if (!r.queued) {
    r.queued = true;
    st.waiting.push_front(r.id);
  }
  pump(self);
}

serve::finish_reason to_reason(model::finish_reason f) {
  switch (f) {
    case model::finish_reason::stop:
      return serve::finish_reason::stop_token;
    case model::finish_reason::context:
      return serve::finish_reason::context_full;
    default:
      return serve::finish_reason::max_tokens;
  }
}

// Whether the message being handled comes from a worker of the request's current attempt: only
// they speak for it (a request waiting for a new attempt has none).
bool from_attempt_workers(router_pointer self, const tracked_request& r) {
  const auto& st = self->state;
  const caf::strong_actor_ptr& sender = self->current_sender();
  auto is = [&](const std::vector<worker_slot>& group, int i) {
    return i >= 0 && static_cast<size_t>(i) < group.size() &&
           sent_by(sender, group[static_cast<size_t>(i)].handle);
  };
  return r.at != phase::waiting && (is(st.prefill, r.prefill) || is(st.decode, r.decode));
}

void on_update(router_pointer self, token_update& u) {
  auto& st = self->state;
  auto it = st.requests.find(u.request);
  if (it == st.requests.end() || it->second.attempt != u.attempt) return;  // stale attempt
  tracked_request& r = it->second;
  if (!from_attempt_workers(self, r)) {
    ++st.foreign_messages;
    return;
  }
  if (r.at == phase::prefill) {
    st.prefill[static_cast<size_t>(r.prefill)].load -= r.prefill_tokens;
    r.at = phase::decode;
  }
  // Tokens before streamed.size() were already sent to the client: never send them again.
  const size_t have = r.streamed.size();
  const size_t first = static_cast<size_t>(u.first_index);
  std::vector<int32_t> fresh;
  std::vector<model::position_logprobs> fresh_logprobs;
  const bool with_logprobs = !u.logprobs.empty() && u.logprobs.size() == u.tokens.size();
  for (size_t i = 0; i < u.tokens.size(); ++i) {
    if (first + i < have) continue;
    fresh.push_back(u.tokens[i]);
    if (with_logprobs) fresh_logprobs.push_back(std::move(u.logprobs[i]));
  }
  if (first > have) {
    return redispatch(self, r, "token stream has a gap");
  }
  if (!u.prompt_logprobs.empty() && !r.prompt_logprobs_sent) {
    r.prompt_logprobs_sent = true;
    r.sink->on_prompt_logprobs(u.prompt_logprobs);
  }
  if (u.cached_tokens != r.cached_tokens) r.sink->on_cached(u.cached_tokens);
  r.cached_tokens = u.cached_tokens;
  r.streamed.insert(r.streamed.end(), fresh.begin(), fresh.end());
  if (!fresh.empty()) {
    if (with_logprobs) r.sink->on_logprobs(fresh_logprobs);
    r.sink->on_tokens(fresh);
    // Attempts are counted while none makes progress: a long request that lives through many
    // faults keeps going as long as each attempt streams something.
    r.attempts = 0;
  }
  if (u.finished == model::finish_reason::none) return;
  serve::generation_usage usage;
  usage.prompt_tokens = static_cast<int>(r.req.prompt.size());
  usage.completion_tokens = static_cast<int>(r.streamed.size());
  usage.cached_tokens = r.cached_tokens;
  st.decode[static_cast<size_t>(r.decode)].load -= 1;
  r.sink->on_finished(to_reason(u.finished), usage);
  st.by_service_id.erase(r.req.id);
  st.requests.erase(it);
  ++st.completed;
  pump(self);
}

// Admits a request, or refuses it through its sink.
void submit(router_pointer self, generation_job& job) {
  auto& st = self->state;
  auto refuse = [&job](errc code, const std::string& why) { job.sink->on_error(error(code, why)); };
  if (static_cast<int>(st.waiting.size()) >= st.config.admission_queue) {
    return refuse(errc::resource_exhausted, "the admission queue is full (" +
                                                std::to_string(st.config.admission_queue) +
                                                " requests waiting); retry later");
  }
  if (st.by_service_id.count(job.request.id)) {
    return refuse(errc::invalid_argument,
                  "request id " + std::to_string(job.request.id) + " is already in use");
  }
  uint16_t scenario = 0;
  while (scenario < st.config.scenarios.size() &&
         st.config.scenarios[scenario] != job.request.scenario) {
    ++scenario;
  }
  if (scenario == st.config.scenarios.size()) {
    std::string known;
    for (const auto& name : st.config.scenarios)
      known += (known.empty() ? "" : ", ") + name;
    return refuse(errc::invalid_argument,
                  "unknown scenario '" + job.request.scenario + "': known scenarios are " + known);
  }
  if (job.request.top_logprobs < -1 || job.request.top_logprobs > model::max_top_logprobs) {
    return refuse(errc::invalid_argument,
                  "top_logprobs must be between 0 and " + std::to_string(model::max_top_logprobs));
  }
  if (job.request.prompt_logprobs < -1 || job.request.prompt_logprobs > model::max_top_logprobs) {
    return refuse(errc::invalid_argument, "prompt_logprobs must be between 0 and " +
                                              std::to_string(model::max_top_logprobs));
  }
  tracked_request r;
  r.scenario = scenario;
  r.id = st.next_id++;
  r.req = std::move(job.request);
  r.sink = std::move(job.sink);
  r.sink->on_accepted();
  st.by_service_id[r.req.id] = r.id;
  const uint64_t id = r.id;
  r.queued = true;
  st.requests.emplace(id, std::move(r));
  st.waiting.push_back(id);
  pump(self);
}

// A prefill worker's cache changes and the hits of the jobs it admitted: the global index,
// the computed-load correction and the usage counters.
void on_cache_report(router_pointer self, const prefill_cache_report& report) {
  auto& st = self->state;
  if (report.worker < 0 || static_cast<size_t>(report.worker) >= st.prefill.size()) return;
  worker_slot& slot = st.prefill[static_cast<size_t>(report.worker)];
  // A report of an earlier generation describes a pool that is gone.
  if (!slot.alive ||
      self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(slot.handle)) {
    return;
  }
  st.cache_event_errors += static_cast<int64_t>(st.routing->apply(report));
  for (const prefix_hit& hit : report.hits) {
    st.usage->record(hit);
    auto it = st.requests.find(hit.request);
    if (it == st.requests.end() || it->second.attempt != hit.attempt ||
        it->second.prefill != report.worker) {
      continue;
    }
    tracked_request& r = it->second;
    // Tokens the worker computes itself, within [0, prompt] whatever the report says.
    const int64_t cached = int64_t{hit.pool_tokens} + hit.host_tokens + hit.ssd_tokens;
    const int64_t actual =
        std::clamp<int64_t>(hit.prompt_tokens - cached, 0, std::max<int64_t>(0, hit.prompt_tokens));
    st.routing->correct(report.worker, r.prefill_tokens, actual);
    if (r.at == phase::prefill) slot.load += actual - r.prefill_tokens;
    r.prefill_tokens = actual;
  }
}

void on_worker_down(router_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto* group : {&st.prefill, &st.decode}) {
    for (size_t i = 0; i < group->size(); ++i) {
      worker_slot& w = (*group)[i];
      if (!w.alive || w.handle.address() != dm.source) continue;
      w.alive = false;
      const bool is_decode = group == &st.decode;
      if (!is_decode) st.routing->cleared(static_cast<int>(i));
      std::vector<uint64_t> affected;
      for (auto& [id, r] : st.requests) {
        const bool uses = is_decode ? (r.at != phase::waiting && r.decode == static_cast<int>(i))
                                    : (r.at == phase::prefill && r.prefill == static_cast<int>(i));
        if (uses) affected.push_back(id);
      }
      log::warn("router", w.name + " is down (" + to_string(dm.reason) + "); " +
                              std::to_string(affected.size()) + " requests to re-dispatch");
      for (uint64_t id : affected) {
        auto it = st.requests.find(id);
        if (it != st.requests.end()) redispatch(self, it->second, w.name + " died");
      }
    }
  }
}

router_status status_of(const router_state& st) {
  router_status out;
  out.load.name = "router";
  out.load.role = "router";
  out.load.queue_depth = static_cast<int32_t>(st.waiting.size());
  out.load.in_flight = static_cast<int32_t>(st.requests.size() - st.waiting.size());
  out.load.steps = st.completed;
  out.completed = st.completed;
  out.redispatched = st.redispatched;
  out.foreign_messages = st.foreign_messages;
  out.cache_served = st.usage->totals();
  out.computed_tokens = st.routing->computed_tokens();
  for (size_t w = 0; w < st.prefill.size(); ++w)
    out.cached_blocks.push_back(st.routing->cached_blocks(static_cast<int>(w)));
  out.cache_event_errors = st.cache_event_errors;
  return out;
}

// A worker (re)started under its index: it takes new work from now on.
void worker_up(router_pointer self, std::vector<worker_slot>& group, int32_t index,
               const std::string& name, const std::string& node, caf::actor handle,
               int32_t capacity) {
  auto& st = self->state;
  if (index < 0) return;
  if (static_cast<size_t>(index) >= group.size()) group.resize(static_cast<size_t>(index) + 1);
  worker_slot& w = group[static_cast<size_t>(index)];
  w.name = name;
  w.node = node;
  w.suspected = st.suspected_nodes.count(node) > 0;
  w.handle = std::move(handle);
  w.alive = true;
  w.capacity = capacity;
  w.load = 0;
  self->monitor(w.handle);
  pump(self);
}

router_impl::behavior_type router_behavior(router_pointer self, router_config config,
                                           std::shared_ptr<const kvcache::block_hasher> hasher) {
  self->state.config = config;
  self->state.routing =
      std::make_unique<prefill_routing>(std::max(1, config.prefill_workers), config.block_tokens,
                                        std::move(hasher), config.balance_slack);
  self->state.usage = std::make_unique<cache_usage>(config.scenarios);
  self->set_down_handler([self](caf::down_msg& dm) { on_worker_down(self, dm); });
  return {
      // generation_job cannot be deserialized: only this process can submit.
      [=](submit_atom, generation_job& job) { submit(self, job); },
      [=](service_cancel cancel) {
        auto& st = self->state;
        auto id = st.by_service_id.find(cancel.service_id);
        if (id == st.by_service_id.end()) return;
        auto it = st.requests.find(id->second);
        if (it == st.requests.end()) return;
        cancel_at_workers(self, it->second);
        fail_request(self, id->second, error(errc::cancelled, "the request was cancelled"));
      },
      [=](std::vector<token_update>& updates) {
        for (auto& u : updates)
          on_update(self, u);
      },
      [=](job_failed& f) {
        auto& st = self->state;
        auto it = st.requests.find(f.request);
        if (it == st.requests.end() || it->second.attempt != f.attempt) return;
        if (!from_attempt_workers(self, it->second)) {
          ++st.foreign_messages;
          return;
        }
        if (!f.retryable)
          return fail_request(self, f.request, error(errc::invalid_argument, f.reason));
        redispatch(self, it->second, f.reason);
      },
      [=](worker_atom, prefill_up& up) {
        auto& st = self->state;
        st.routing->cleared(up.index);
        worker_up(self, st.prefill, up.index, up.name, up.node,
                  caf::actor_cast<caf::actor>(up.handle), 0);
      },
      [=](worker_atom, decode_up& up) {
        worker_up(self, self->state.decode, up.index, up.name, up.node,
                  caf::actor_cast<caf::actor>(up.handle), up.capacity);
      },
      [=](tick_atom) { pump(self); },
      [=](suspect_atom, const std::string& node, bool suspected) {
        auto& st = self->state;
        if (!sent_locally(self->current_sender(), self->node())) return;
        if (suspected) {
          st.suspected_nodes.insert(node);
        } else {
          st.suspected_nodes.erase(node);
        }
        for (auto* group : {&st.prefill, &st.decode}) {
          for (auto& w : *group) {
            if (w.node == node) w.suspected = suspected;
          }
        }
        pump(self);
      },
      [=](const prefill_cache_report& report) { on_cache_report(self, report); },
      [=](status_atom) { return status_of(self->state); },
  };
}

}  // namespace

router_actor spawn_router(caf::actor_system& sys, router_config config,
                          std::shared_ptr<const kvcache::block_hasher> hasher) {
  return sys.spawn(router_behavior, config, std::move(hasher));
}

void register_router_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<prefill_up>("brigade::prefill_up");
  cfg.add_message_type<decode_up>("brigade::decode_up");
  cfg.add_message_type<scenario_cache_usage>("brigade::scenario_cache_usage");
  cfg.add_message_type<router_status>("brigade::router_status");
  cfg.add_message_type<router_actor>("brigade::router_actor");
}

}  // namespace brigade::actors

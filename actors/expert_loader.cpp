#include "actors/expert_loader.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "actors/remote_link.hpp"
#include "common/log.hpp"

namespace brigade::actors {
namespace {

// One copy at a time: a migration then takes about as long (the copies are small next to the
// time a step needs), and serving meets one copy's memory and network traffic at a time instead of
// four (bench balance --migration-nodes: the migrations' share of the p99 step time fell from
// 1.73x to 1.2-1.4x).
constexpr int max_copies_in_flight = 1;
constexpr std::chrono::seconds copy_timeout{120};

// Serving steps come first: background copies run at the lowest nice level (Linux: per thread),
// with a small share of a busy core. Not SCHED_IDLE: its share of a core that serving keeps busy
// is five times smaller still, and under full load a migration crawled (0.2 s for what takes a few
// ms, with two busy loops beside a one-process topology), while steps overlapping migrations were
// no faster than at nice 19 (bench balance, two alternated pairs, one process and two nodes:
// 1.04-1.07x their local median with SCHED_IDLE, 1.02-1.06x at nice 19).
void lower_this_threads_priority() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
}

struct copy_job {
  expert_key key;
  caf::actor from;  // null: read the checkpoint
};

struct loader_state {
  std::shared_ptr<const model_context> ctx;
  loaded_sink_actor shard;
  std::deque<load_job> queued;  // jobs not started yet, in arrival order
  // The job in progress, if busy. Answers carry the serial of the job that asked, so that those
  // for an aborted job are dropped.
  bool busy = false;
  uint64_t serial = 0;
  uint64_t epoch = 0;
  std::vector<copy_job> jobs;
  size_t next = 0;
  int in_flight = 0;
  bool resting = false;  // waiting out the copy interval after a copy that moved bytes
  std::chrono::milliseconds copy_interval{0};
  std::shared_ptr<loaded_experts> out;
  static inline const char* name = "expert_loader";
};

using loader_pointer = caf::stateful_actor<loader_state>*;

void read_checkpoint(loader_state& st, const expert_key& key) {
  auto w = model::expert_bank::load_one(*st.ctx->ckpt, st.ctx->config, *st.ctx->dev, key.first,
                                        key.second);
  if (!w) {
    st.out->error = w.err().message;
    return;
  }
  st.out->weights[key] = std::make_shared<const model::ffn_weights>(std::move(w.value()));
  ++st.out->counts.from_checkpoint;
}

void pump(loader_pointer self);

// After an expert that moved bytes (and before the first of a job that moves bytes), the loader
// waits out the copy interval: a migration's copies then spread over more steps, each step
// meeting less of them.
void rest_after_copy(loader_pointer self) {
  auto& st = self->state;
  if (st.copy_interval.count() <= 0) return;
  st.resting = true;
  self->delayed_send(self, st.copy_interval, tick_atom_v, st.serial);
}

// Turns the next queued job's plan into copy jobs: an expert per entry, from its source or, with
// none, from the checkpoint.
void start_next(loader_pointer self) {
  auto& st = self->state;
  if (st.busy || st.queued.empty()) return;
  load_job job = std::move(st.queued.front());
  st.queued.pop_front();
  st.busy = true;
  ++st.serial;
  st.epoch = job.plan.epoch;
  st.jobs.clear();
  st.next = 0;
  st.in_flight = 0;
  st.resting = false;
  st.out = std::make_shared<loaded_experts>();
  std::map<expert_key, caf::actor> sources;
  for (auto& s : job.plan.sources)
    sources[{s.layer, s.expert}] = std::move(s.from);
  std::set<expert_key> added;
  for (const auto& a : job.plan.slots) {
    const expert_key key{a.layer, a.expert};
    if (job.have.count(key) || !added.insert(key).second) continue;
    auto it = sources.find(key);
    st.jobs.push_back({key, it != sources.end() ? it->second : caf::actor{}});
  }
  // A job that moves bytes waits out one copy interval before its first copy too. The supervisor
  // prepares every shard at once, so without the wait every loader copied in the same step as
  // the prepares: that step paid 8% in the median, and the copies' share of the p99 was about 3%
  // higher (bench balance --migration-nodes, three alternated pairs of 80 migrations: the step a
  // migration began in 0.999x its local median against 1.078x, p99 during over p99 outside 1.036x
  // against 1.071x, lower in every pair; each migration 0.1 s longer).
  const bool moves_bytes = std::any_of(st.jobs.begin(), st.jobs.end(), [&](const copy_job& j) {
    return !j.from || j.from->node() != self->node();
  });
  if (moves_bytes) rest_after_copy(self);
  pump(self);
}

void finish_if_done(loader_pointer self) {
  auto& st = self->state;
  if (!st.busy || st.in_flight > 0 || (st.next < st.jobs.size() && st.out->error.empty())) return;
  st.busy = false;
  self->send(st.shard, loaded_atom_v, st.epoch, std::move(st.out));
  start_next(self);
}

// Returns whether bytes moved (anything but sharing weights within this process).
bool on_copy(loader_pointer self, const copy_job& job, bool other_node, expert_weights& w) {
  auto& st = self->state;
  if (w.shared && !other_node) {  // one process, one device: share, do not copy
    st.out->weights[job.key] = std::move(w.shared);
    ++st.out->counts.same_node;
    return false;
  }
  auto imported = import_expert(*st.ctx->dev, st.ctx->config, w, job.key.first, job.key.second);
  if (!imported) {
    log::warn("expert_loader", imported.err().message + "; reading it from the checkpoint instead");
    read_checkpoint(st, job.key);
    return true;
  }
  st.out->weights[job.key] =
      std::make_shared<const model::ffn_weights>(std::move(imported.value()));
  if (other_node) {
    ++st.out->counts.other_nodes;
    st.out->counts.other_nodes_bytes += static_cast<int64_t>(w.size);
  } else {
    ++st.out->counts.same_node;
  }
  return true;
}

// Starts copies up to the in-flight bound; checkpoint reads run inline.
void pump(loader_pointer self) {
  auto& st = self->state;
  while (st.out->error.empty() && !st.resting && st.in_flight < max_copies_in_flight &&
         st.next < st.jobs.size()) {
    const copy_job job = st.jobs[st.next++];
    if (!job.from) {
      read_checkpoint(st, job.key);
      rest_after_copy(self);
      continue;
    }
    auto source = caf::actor_cast<expert_shard_actor>(job.from);
    const bool other_node = source->node() != self->node();
    if (remote_link* link = remote_link::current()) source = link->local_view(source);
    ++st.in_flight;
    self->request(source, copy_timeout, weights_atom_v, job.key.first, job.key.second, !other_node)
        .then(
            [self, job, other_node, serial = st.serial](expert_weights& w) {
              if (self->state.serial != serial) return;
              --self->state.in_flight;
              if (on_copy(self, job, other_node, w)) rest_after_copy(self);
              pump(self);
            },
            [self, job, serial = st.serial](caf::error& err) {
              auto& s = self->state;
              if (s.serial != serial) return;
              --s.in_flight;
              log::warn("expert_loader", "copying expert " + std::to_string(job.key.second) +
                                             " of layer " + std::to_string(job.key.first) +
                                             " from a peer failed (" + to_string(err) +
                                             "); reading it from the checkpoint instead");
              read_checkpoint(s, job.key);
              rest_after_copy(self);
              pump(self);
            });
  }
  finish_if_done(self);
}

caf::behavior loader(loader_pointer self, std::shared_ptr<const model_context> ctx,
                     loaded_sink_actor shard, std::chrono::milliseconds copy_interval) {
  lower_this_threads_priority();
  self->state.ctx = std::move(ctx);
  self->state.shard = std::move(shard);
  self->state.copy_interval = copy_interval;
  return {
      [self](tick_atom, uint64_t serial) {  // the copy interval is over
        auto& st = self->state;
        if (!st.busy || st.serial != serial) return;
        st.resting = false;
        pump(self);
      },
      [self](load_job& job) {
        self->state.queued.push_back(std::move(job));
        start_next(self);
      },
      // The shard gave up on the epoch: its job goes, queued or begun, and the next one starts.
      [self](abort_atom, uint64_t epoch) {
        auto& st = self->state;
        auto& q = st.queued;
        q.erase(std::remove_if(q.begin(), q.end(),
                               [&](const load_job& j) { return j.plan.epoch == epoch; }),
                q.end());
        if (st.busy && st.epoch == epoch) {
          st.busy = false;
          ++st.serial;
          start_next(self);
        }
      },
  };
}

caf::behavior exporter(caf::event_based_actor*, std::shared_ptr<const model_context> ctx) {
  lower_this_threads_priority();
  return {[ctx](export_job& job) {
    return export_expert(*ctx->dev, *job.weights, job.key.first, job.key.second);
  }};
}

}  // namespace

expert_copy_counts& expert_copy_counts::operator+=(const expert_copy_counts& o) {
  same_node += o.same_node;
  same_node_indexed += o.same_node_indexed;
  other_nodes += o.other_nodes;
  other_nodes_bytes += o.other_nodes_bytes;
  from_checkpoint += o.from_checkpoint;
  return *this;
}

std::shared_ptr<loaded_experts> load_from_checkpoint(const model_context& ctx,
                                                     const shard_plan& plan,
                                                     const std::set<expert_key>& have) {
  auto out = std::make_shared<loaded_experts>();
  for (const auto& a : plan.slots) {
    const expert_key key{a.layer, a.expert};
    if (have.count(key) || out->weights.count(key)) continue;
    auto w = model::expert_bank::load_one(*ctx.ckpt, ctx.config, *ctx.dev, a.layer, a.expert);
    if (!w) {
      out->error = w.err().message;
      break;
    }
    out->weights[key] = std::make_shared<const model::ffn_weights>(std::move(w.value()));
    ++out->counts.from_checkpoint;
  }
  return out;
}

caf::actor spawn_expert_loader(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                               loaded_sink_actor shard, std::chrono::milliseconds copy_interval) {
  return sys.spawn<caf::detached>(loader, std::move(ctx), std::move(shard), copy_interval);
}

caf::actor spawn_expert_exporter(caf::actor_system& sys, std::shared_ptr<const model_context> ctx) {
  return sys.spawn<caf::detached>(exporter, std::move(ctx));
}

}  // namespace brigade::actors

// The supervisor's half that moves experts: load samples in, re-plans, and migrations that
// prepare the new slots in the background, switch workers at step boundaries, then free the old
// slots — or roll back to the last complete layout when anything fails on the way.
//
//   idle --plan adopted--> preparing --every shard loaded--> switching --every worker switched-->
//     idle (old slots released)         \--failure--> rolled back --/       \--failure--/
#include <caf/all.hpp>

#include <algorithm>

#include "actors/decode_worker.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/sender_check.hpp"
#include "common/log.hpp"
#include "deploy/supervisor_state.hpp"

namespace brigade::deploy {
namespace {

double seconds_since(supervisor_clock::time_point t) {
  return std::chrono::duration<double>(supervisor_clock::now() - t).count();
}

std::set<std::string> live_workers(const supervisor_state& st) {
  std::set<std::string> out;
  for (const auto& [name, c] : st.children) {
    if (c.alive && is_worker(c.role)) out.insert(name);
  }
  return out;
}

void finish_migration(supervisor_pointer self) {
  auto& st = self->state;
  const uint64_t epoch = st.moving->target.epoch();
  const double secs = seconds_since(st.moving->started);
  for (auto& shard : st.shards.shards)
    self->send(shard, release_atom_v, epoch);
  st.balance->adopt(st.moving->target, secs);
  log::info("supervisor", "layout epoch " + std::to_string(epoch) +
                              " adopted: " + std::to_string(st.moving->moved_slots) +
                              " slots moved in " + std::to_string(secs) + " s");
  st.moving.reset();
}

void check_switched(supervisor_pointer self) {
  auto& st = self->state;
  if (!st.moving || st.moving->at != migration::phase::switching) return;
  for (const auto& w : live_workers(st)) {
    if (!st.moving->switched.count(w)) return;
  }
  finish_migration(self);
}

void begin_switch(supervisor_pointer self) {
  auto& st = self->state;
  st.moving->at = migration::phase::switching;
  st.shards.layout = st.moving->target;
  broadcast_shards(self);
  check_switched(self);
}

}  // namespace

shard_plan plan_for_shard(const eplb::layout& layout, const std::vector<int>& moe_layers,
                          int shard) {
  shard_plan plan;
  plan.epoch = layout.epoch();
  const int first = shard * layout.slots_per_shard();
  for (int l = 0; l < layout.layers(); ++l) {
    for (int slot = first; slot < first + layout.slots_per_shard(); ++slot) {
      plan.slots.push_back({moe_layers[static_cast<size_t>(l)], slot, layout.logical(l, slot)});
    }
  }
  return plan;
}

// Names, for each expert new to `shard` under its plan, a peer that holds it now: one on the
// shard's own node when there is one (no network), otherwise the holder given the fewest copies
// so far, so that the sources share the work.
void add_weight_sources(shard_plan& plan, const eplb::layout& current,
                        const std::vector<int>& layout_layer,
                        const std::vector<expert_shard_actor>& shards, int shard,
                        std::vector<int>& copies_given) {
  const expert_shard_actor& self_shard = shards[static_cast<size_t>(shard)];
  std::set<std::pair<int32_t, int32_t>> named;
  for (const auto& a : plan.slots) {
    const eplb::slot_list holders =
        current.log2phy(layout_layer[static_cast<size_t>(a.layer)], a.expert);
    int best = -1;
    bool best_local = false;
    bool holds_already = false;
    for (int32_t slot : holders) {
      const int holder = current.shard_of(slot);
      if (holder == shard) holds_already = true;
      const auto& h = shards[static_cast<size_t>(holder)];
      if (holder == shard || !h) continue;
      const bool local = self_shard && h->node() == self_shard->node();
      if (best < 0 || (local && !best_local) ||
          (local == best_local &&
           copies_given[static_cast<size_t>(holder)] < copies_given[static_cast<size_t>(best)])) {
        best = holder;
        best_local = local;
      }
    }
    if (holds_already || best < 0 || !named.insert({a.layer, a.expert}).second) continue;
    ++copies_given[static_cast<size_t>(best)];
    plan.sources.push_back(
        {a.layer, a.expert, caf::actor_cast<caf::actor>(shards[static_cast<size_t>(best)])});
  }
}

// Each shard's node as a small number, in order of first appearance; a shard not running counts
// as a node of its own (its replacement may start anywhere).
std::vector<int> shard_nodes(const std::vector<expert_shard_actor>& shards) {
  std::vector<caf::node_id> seen;
  std::vector<int> out;
  for (const auto& s : shards) {
    if (!s) {
      out.push_back(static_cast<int>(shards.size() + out.size()));
      continue;
    }
    auto it = std::find(seen.begin(), seen.end(), s->node());
    if (it == seen.end()) it = seen.insert(seen.end(), s->node());
    out.push_back(static_cast<int>(it - seen.begin()));
  }
  return out;
}

bool may_start_migration(const supervisor_state& st) {
  return !st.moving && !st.shutting_down;
}

bool start_migration(supervisor_pointer self, eplb::layout target) {
  auto& st = self->state;
  if (!may_start_migration(st)) return false;
  st.moving = std::make_unique<migration>();
  st.moving->target = std::move(target);
  st.moving->started = supervisor_clock::now();
  st.moving->moved_slots = st.balance->moved_slots(st.moving->target);
  const uint64_t epoch = st.moving->target.epoch();
  st.balance->migration_started(epoch, st.moving->moved_slots);
  std::vector<int> copies_given(st.shards.shards.size(), 0);
  const std::vector<int> moe_layers = st.ctx->config.moe_layers();
  std::vector<int> layout_layer(static_cast<size_t>(st.ctx->config.num_layers), -1);
  for (size_t l = 0; l < moe_layers.size(); ++l)
    layout_layer[static_cast<size_t>(moe_layers[l])] = static_cast<int>(l);
  for (size_t i = 0; i < st.shards.shards.size(); ++i) {
    const int shard = static_cast<int>(i);
    shard_plan plan = plan_for_shard(st.moving->target, moe_layers, shard);
    add_weight_sources(plan, st.balance->current(), layout_layer, st.shards.shards, shard,
                       copies_given);
    self->request(st.shards.shards[i], std::chrono::minutes(5), prepare_atom_v, std::move(plan))
        .then(
            [self, epoch, shard](bool) {
              auto& s = self->state;
              if (!s.moving || s.moving->target.epoch() != epoch) return;
              s.moving->prepared.insert(shard);
              if (static_cast<int>(s.moving->prepared.size()) ==
                  static_cast<int>(s.shards.shards.size())) {
                begin_switch(self);
              }
            },
            [self, epoch, shard](caf::error& err) {
              auto& s = self->state;
              if (!s.moving || s.moving->target.epoch() != epoch) return;
              roll_back(self, "expert_shard-" + std::to_string(shard) +
                                  " could not prepare: " + to_string(err));
            });
  }
  return true;
}

void roll_back(supervisor_pointer self, const std::string& why) {
  auto& st = self->state;
  if (!st.moving) return;
  const uint64_t epoch = st.moving->target.epoch();
  log::warn("supervisor", "migration to epoch " + std::to_string(epoch) + " rolled back: " + why);
  for (auto& shard : st.shards.shards)
    self->send(shard, abort_atom_v, epoch);
  const bool workers_moved = st.moving->at == migration::phase::switching;
  st.balance->rolled_back(epoch, seconds_since(st.moving->started), why);
  st.moving.reset();
  if (workers_moved) {
    st.shards.layout = st.balance->current();
    broadcast_shards(self);
  }
}

void on_load_sample(supervisor_pointer self, const load_sample& sample) {
  auto& st = self->state;
  // Only the shard itself reports its loads, they steer where experts go; a sample of an earlier
  // generation of the shard (sent before it died) is stale.
  const auto& shards = st.shards.shards;
  if (sample.shard < 0 || static_cast<size_t>(sample.shard) >= shards.size() ||
      !sent_by(self->current_sender(), shards[static_cast<size_t>(sample.shard)])) {
    return;
  }
  if (!st.balance->add_sample(sample.shard, sample.window, sample.tokens)) return;
  if (st.moving || !st.config.manifest.eplb.enabled) return;
  if (auto proposal = st.balance->plan_if_due(shard_nodes(st.shards.shards))) {
    start_migration(self, std::move(*proposal));
  }
}

void on_switched(supervisor_pointer self, const std::string& worker, uint64_t epoch) {
  auto& st = self->state;
  if (!st.moving || st.moving->target.epoch() != epoch) return;
  st.moving->switched.insert(worker);
  check_switched(self);
}

migration_progress migration_of(const supervisor_state& st) {
  migration_progress m;
  if (!st.moving) return m;
  m.running = true;
  m.epoch = st.moving->target.epoch();
  m.switching = st.moving->at == migration::phase::switching;
  m.moved_slots = st.moving->moved_slots;
  m.shards_prepared = st.moving->prepared.size();
  m.workers_switched = st.moving->switched.size();
  m.elapsed_s = seconds_since(st.moving->started);
  return m;
}

}  // namespace brigade::deploy

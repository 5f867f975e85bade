// How a worker talks to the expert shards: sending one MoE layer's routed rows and collecting the
// answers, waiting out a failed shard, and switching layouts at step boundaries. Shared by the
// prefill and decode workers; included by their .cpp files only.
//
//   step: dispatch layer --answers--> next layer ... --> step done (pending layout applied)
//                 \--a shard failed--> stalled --new shard set--> resend the layer
//                                              \--stall timeout--> the step is abandoned
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/local_experts.hpp"
#include "actors/remote_link.hpp"
#include "actors/sender_check.hpp"
#include "actors/shard_set.hpp"
#include "common/log.hpp"
#include "eplb/replica_dispatch.hpp"
#include "model/step_driver.hpp"

namespace brigade::actors {

/// How long a worker waits for an expert shard before failing the step. Liveness comes from
/// monitors (a dead shard answers at once); this bound only catches a hung one.
constexpr std::chrono::seconds expert_timeout{30};
/// When an unanswered expert call is first sent again (then 2x, 4x ... 16x that).
constexpr std::chrono::milliseconds expert_retry_after{1000};

/// A layer whose rows went to shards of this process: when it went out, and how to fail it.
struct open_layer {
  std::chrono::steady_clock::time_point sent;
  std::function<void(const std::string&)> fail;
};

/// What a worker keeps about the shards it sends rows to.
struct expert_client {
  std::string owner;  ///< The worker's name, for logs and acknowledgements.
  shard_set shards;
  /// `shards` as the supervisor sent them, before localize(): a failed call localizes them again,
  /// in case the data plane has learnt a node's peer since (relocalize).
  shard_set as_sent;
  std::optional<shard_set> pending;  ///< A new layout waiting for the step boundary.
  bool stalled = false;              ///< A layer failed and waits for a new shard set.
  layout_ack_actor acks;             ///< Told which layout epoch the worker routes with.
  std::chrono::milliseconds stall_timeout{10000};
  /// Per model layer, its layer in the expert layout (the MoE layers in order; -1 if dense).
  std::vector<int> layout_layer;
  /// Which replica takes each row: the one on the shard this worker has loaded least lately.
  eplb::replica_dispatch replicas;
  /// Per shard of `shards`: whether it is an actor of this process itself, not a proxy for one on
  /// another node. A message to it cannot be lost, so its calls carry no timeout of their own
  /// (each would cost the actor clock two wake-ups: some 10 context switches a decode step);
  /// one guard timer per worker catches a shard that hangs (on_expert_guard).
  std::vector<bool> in_process;
  std::optional<open_layer> waiting;  ///< The layer waiting on shards of this process, if any.
  local_scratch local;                ///< Where the rows of shards of this process are computed.
  bool guard_armed = false;           ///< A guard_atom is on its way to the worker.
};

/// Shards on other nodes are reached through the data plane's local proxies. Returns, per shard,
/// whether it is an actor of this process itself.
inline std::vector<bool> localize(shard_set& set) {
  std::vector<bool> in_process(set.shards.size(), true);
  if (remote_link* link = remote_link::current()) {
    for (size_t s = 0; s < set.shards.size(); ++s) {
      expert_shard_actor view = link->local_view(set.shards[s]);
      in_process[s] = view == set.shards[s];
      set.shards[s] = std::move(view);
    }
  }
  return in_process;
}

template <class Self>
void adopt_shards(Self* self, expert_client& c, shard_set next) {
  c.as_sent = next;
  c.in_process = localize(next);
  const bool new_epoch = c.shards.shards.empty() || c.shards.layout.epoch() != next.layout.epoch();
  c.shards = std::move(next);
  if (new_epoch && c.acks) self->send(c.acks, switched_atom_v, c.owner, c.shards.layout.epoch());
}

/// Localizes the shard set the supervisor sent again; true when a shard's view changed. A node
/// that rejoined under a new data-plane peer while this one was cut off from the coordinator
/// was not announced here in time: its shards kept their raw CAF handles, which cannot carry
/// expert rows. Once the peer is known, the next failed call finds its proxy.
inline bool relocalize(expert_client& c) {
  if (c.as_sent.version != c.shards.version || c.as_sent.shards.size() != c.shards.shards.size()) {
    return false;
  }
  shard_set again = c.as_sent;
  std::vector<bool> in_process = localize(again);
  if (again.shards == c.shards.shards) return false;
  c.shards.shards = std::move(again.shards);
  c.in_process = std::move(in_process);
  return true;
}

/// Whether a shard set that arrived may be used: it comes from the supervisor, its layout fits the
/// model, and it names a shard for each of the layout's. A bad one is logged and dropped: the
/// worker keeps its layout.
template <class Self>
bool acceptable_shards(Self* self, const expert_client& c, const shard_set& next,
                       const model::model_config& model) {
  const caf::strong_actor_ptr& sender = self->current_sender();
  std::string why;
  if (!sent_by(sender, c.acks)) {
    why = "it did not come from the supervisor";
  } else if (status fits = check_shards(next, model); !fits) {
    why = fits.err().message;
  }
  if (why.empty()) return true;
  log::warn(c.owner, "ignored a shard set from " +
                         (sender ? caf::to_string(sender->node()) : std::string("nobody")) + ": " +
                         why);
  return false;
}

/// A new shard set arrived. A new layout waits for the step boundary unless the worker is idle or
/// stalled (expert FFNs are pure, so resending a layer under any layout gives the same rows).
/// Returns true when the caller must resend its stalled layer.
template <class Self>
bool receive_shards(Self* self, expert_client& c, shard_set next, bool busy) {
  const bool same_epoch =
      !c.shards.shards.empty() && c.shards.layout.epoch() == next.layout.epoch();
  if (busy && !c.stalled && !same_epoch) {
    c.pending = std::move(next);
    return false;
  }
  c.pending.reset();
  const bool replaced = next.version != c.shards.version;
  adopt_shards(self, c, std::move(next));
  const bool resend = c.stalled;
  c.stalled = false;
  if (busy && !resend && replaced && c.waiting) {
    // A shard of this process was replaced (it died) while the layer waited on it: its calls
    // carry no timeout, and a shard that died inside a call may never answer, so the layer goes
    // out again now with the new set (the old attempt's late answers are dropped).
    auto fail = std::move(c.waiting->fail);
    c.waiting.reset();
    fail("the shard set changed (version " + std::to_string(c.shards.version) +
         ") while the layer waited");
  }
  return resend;
}

/// At a step boundary: switch to a layout that arrived during the step.
template <class Self>
void apply_pending_layout(Self* self, expert_client& c) {
  if (!c.pending) return;
  shard_set next = std::move(*c.pending);
  c.pending.reset();
  adopt_shards(self, c, std::move(next));
}

/// Sends the rows of driver.layer() to the shards holding their experts, and calls on_done()
/// once every answer is stored in the driver. On a failure, if a newer shard set than the one the
/// layer went out with has already arrived (the replacement of a shard that died, a new layout),
/// on_retry() resends the layer at once; otherwise the layer stalls: the worker resends it when a
/// new shard set arrives, and gets tick_atom(step) after the stall timeout. Answers arriving when
/// *current_step has moved on are dropped.
template <class Self>
void dispatch_layer(Self* self, expert_client& c, model::step_driver& driver, uint64_t step,
                    const uint64_t* current_step, std::function<void()> on_done,
                    std::function<void()> on_retry) {
  const model::routing& r = driver.routes();
  const eplb::layout& layout = c.shards.layout;
  const int layer = driver.layer();
  const int layout_layer = c.layout_layer.at(static_cast<size_t>(layer));
  const size_t shards = c.shards.shards.size();
  std::vector<std::vector<int32_t>> step_slots(shards), phys(shards);
  const int rows = r.tokens * r.top_k;
  std::vector<int32_t> chosen(static_cast<size_t>(rows));
  c.replicas.assign(layout, layout_layer, r.experts.data(), rows, chosen.data());
  for (int slot = 0; slot < rows; ++slot) {
    const int32_t phy = chosen[static_cast<size_t>(slot)];
    const size_t shard = static_cast<size_t>(layout.shard_of(phy));
    step_slots[shard].push_back(slot);
    phys[shard].push_back(phy);
  }
  struct progress {
    int pending = 0;
    bool failed = false;
  };
  auto p = std::make_shared<progress>();
  for (size_t s = 0; s < shards; ++s)
    p->pending += step_slots[s].empty() ? 0 : 1;
  auto done = std::make_shared<std::function<void()>>(std::move(on_done));
  auto retry = std::make_shared<std::function<void()>>(std::move(on_retry));
  const uint64_t set_version = c.shards.version;
  expert_client* client = &c;
  // Fails the layer (once): resends it at once when a newer shard set is here, else stalls.
  auto fail_layer = [=](const std::string& where) {
    if (p->failed || *current_step != step) return;
    p->failed = true;
    client->waiting.reset();
    // The supervisor may have sent the shard's replacement while this call was in flight:
    // then no newer set is coming, and waiting for one would stall the step for good.
    if (client->pending && client->pending->version > client->shards.version) {
      apply_pending_layout(self, *client);
    }
    if (client->shards.version != set_version) {
      log::info(client->owner, where + "; resending with the newer shard set");
      return (*retry)();
    }
    if (relocalize(*client)) {
      log::info(client->owner, where + "; resending through the data plane's proxies");
      return (*retry)();
    }
    log::warn(client->owner, where + "; waiting for the supervisor");
    client->stalled = true;
    self->delayed_send(self, client->stall_timeout, tick_atom_v, step);
  };
  bool any_in_process = false;
  std::vector<local_call> locals;
  for (size_t s = 0; s < shards; ++s) {
    if (step_slots[s].empty()) continue;
    if (s < c.in_process.size() && c.in_process[s]) {
      // A shard of this process whose core is up: the worker computes its rows itself, below,
      // after the messages to the others have gone out.
      const expert_shard_actor& handle = c.shards.shards[s];
      if (auto core = local_shard_cores::find(handle->ctrl())) {
        locals.push_back(
            {s, handle, std::move(core), std::move(step_slots[s]), std::move(phys[s])});
        continue;
      }
    }
    expert_request req;
    req.step = step;
    req.caller = self->id();
    req.epoch = layout.epoch();
    req.layer = layer;
    req.slots = std::move(phys[s]);
    driver.input_rows(step_slots[s], req.input.data);
    req.input.rows = static_cast<int32_t>(req.slots.size());
    req.input.cols = static_cast<int32_t>(req.input.data.size() / req.slots.size());
    auto slots = std::make_shared<std::vector<int32_t>>(std::move(step_slots[s]));
    const size_t expected_floats = req.input.data.size();  // one output row per input row
    model::step_driver* d = &driver;
    const uint64_t req_epoch = layout.epoch();
    auto fail = [=](const std::string& why) {
      fail_layer("expert shard " + std::to_string(s) + " (layout epoch " +
                 std::to_string(req_epoch) + ") failed at layer " + std::to_string(layer) +
                 " of step " + std::to_string(step) + ": " + why);
    };
    auto request = std::make_shared<const expert_request>(std::move(req));
    auto answered = std::make_shared<bool>(false);
    const expert_shard_actor shard = c.shards.shards[s];
    auto on_reply = [=](expert_reply& reply) {
      if (*answered || p->failed || *current_step != step) return;
      *answered = true;
      // A shard on another node may answer anything: never read past its rows.
      if (reply.output.data.size() != expected_floats) {
        return fail("it answered " + std::to_string(reply.output.data.size()) + " values for " +
                    std::to_string(expected_floats));
      }
      d->deliver(*slots, reply.output.data.data());
      if (--p->pending == 0) {
        client->waiting.reset();
        (*done)();
      }
    };
    if (s < c.in_process.size() && c.in_process[s]) {
      // No timeout: a dead shard of this process answers at once (CAF's error for a receiver
      // that is down), a replaced shard set resends the layer (receive_shards), and the
      // worker's guard catches a shard that hangs.
      any_in_process = true;
      self->request(shard, caf::infinite, *request).then(on_reply, [=](caf::error& err) {
        if (*answered || p->failed || *current_step != step) return;
        fail(to_string(err));
      });
      continue;
    }
    // Through a proxy, a call whose answer does not come is sent again, after 1 s and then ever
    // longer: a lost message (a lossy link) costs a retry, not the step. Expert FFNs are pure, so
    // a late first answer and the retry's are the same rows; whichever comes first counts.
    const auto started = std::chrono::steady_clock::now();
    auto send = std::make_shared<std::function<void(int)>>();
    *send = [=, weak = std::weak_ptr<std::function<void(int)>>(send)](int attempt) {
      auto again = weak.lock();
      const std::chrono::milliseconds wait = std::min<std::chrono::milliseconds>(
          expert_retry_after * (1 << std::min(attempt, 4)), expert_timeout);
      self->request(shard, wait, *request).then(on_reply, [=](caf::error& err) {
        if (*answered || p->failed || *current_step != step) return;
        const bool late = err == caf::sec::request_timeout;
        if (late && std::chrono::steady_clock::now() - started < expert_timeout && again) {
          return (*again)(attempt + 1);
        }
        fail(late ? "no answer within " + std::to_string(expert_timeout.count()) + " s"
                  : to_string(err));
      });
    };
    (*send)(0);
  }
  if (!locals.empty()) {
    const uint64_t epoch = layout.epoch();
    if (auto failed = run_local_calls(locals, step, self->id(), epoch, driver,
                                      caf::actor_cast<caf::strong_actor_ptr>(self), c.local)) {
      return fail_layer("expert shard " + std::to_string(failed->shard) + " (layout epoch " +
                        std::to_string(epoch) + ") failed at layer " + std::to_string(layer) +
                        " of step " + std::to_string(step) + ": " + failed->why);
    }
    p->pending -= static_cast<int>(locals.size());
    if (p->pending == 0) return (*done)();
  }
  if (!any_in_process) return;
  c.waiting = open_layer{std::chrono::steady_clock::now(), fail_layer};
  if (!c.guard_armed) {
    c.guard_armed = true;
    self->delayed_send(self, expert_timeout, guard_atom_v);
  }
}

/// guard_atom: fails the layer waiting on shards of this process if it has waited expert_timeout
/// (a hung shard: a dead one answers at once); else comes back when that layer would be due. One
/// timer per worker at a time, whatever the step rate.
template <class Self>
void on_expert_guard(Self* self, expert_client& c) {
  c.guard_armed = false;
  if (!c.waiting) return;
  const auto waited = std::chrono::steady_clock::now() - c.waiting->sent;
  if (waited >= expert_timeout) {
    auto fail = std::move(c.waiting->fail);
    c.waiting.reset();
    return fail("a shard of this process gave no answer within " +
                std::to_string(expert_timeout.count()) + " s");
  }
  c.guard_armed = true;
  self->delayed_send(self,
                     std::chrono::duration_cast<std::chrono::milliseconds>(expert_timeout - waited),
                     guard_atom_v);
}

}  // namespace brigade::actors

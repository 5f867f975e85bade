// The step loop prefill and decode workers share: a step is one forward pass over a batch, run
// layer by layer; each MoE layer's rows go to the expert shards (actors/expert_dispatch.hpp) and
// the step goes on when they answer. A worker supplies only what differs: how it fills a batch,
// what it does with the logits, what it hands back when a step is abandoned. Included by the
// workers' .cpp files only.
//
//   idle --step_atom--> fill_batch --(nothing to run)--> idle
//                           |
//                        running --(every layer done)--> step_done --> idle, step_atom if has_work
//                           |  \--(a shard failed)--> stalled --(new shard set)--> layer resent
//                           |                                 \--(stall timeout: tick_atom)-->
//                           |                                      step_abandoned --> idle
//   shards_atom: a new shard set; a new layout waits for the step boundary unless the worker
//   is idle or stalled.
//
// A worker's state has a `loop` member of type step_loop; its actor handle is extended with the
// loop's private messages (with_step_loop), which only the worker sends itself.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "actors/expert_dispatch.hpp"
#include "actors/payloads.hpp"
#include "actors/sender_check.hpp"
#include "actors/step_resources.hpp"
#include "model/step_batch.hpp"
#include "model/step_driver.hpp"

namespace brigade::actors {

/// A worker's handle with the loop's private messages: try a step; a stalled step's timeout.
template <class PublicHandle>
using with_step_loop = typename PublicHandle::template extend<
    caf::reacts_to<step_atom>, caf::reacts_to<tick_atom, uint64_t>, caf::reacts_to<guard_atom>>;

/// What only the worker knows.
struct step_hooks {
  /// Fills the loop's batch for the next step; false when there is nothing to run now.
  std::function<bool()> fill_batch;
  /// The step ran: its logits are in run.driver->logits(), in the batch's order.
  std::function<void()> step_done;
  /// The step cannot finish (a shard stayed unavailable): its work goes back to the router.
  std::function<void(const std::string& reason)> step_abandoned;
  /// Whether another step has something to do.
  std::function<bool()> has_work;
};

struct step_loop {
  expert_client experts;
  step_resources run;  ///< KV storage, block pool, workspace, step driver
  model::step_batch batch;
  step_hooks hooks;
  bool busy = false;
  bool step_queued = false;  ///< A step_atom from request_step() is in the mailbox.
  uint64_t step = 0;         ///< Numbers the steps: expert answers of other steps are dropped.
  int64_t steps_done = 0;
  double last_ms = 0.0;
  double total_ms = 0.0;  ///< All steps: mean step times, busy time.
  std::chrono::steady_clock::time_point step_start;
};

/// Sets the loop up with the shards the worker starts with and the resources its steps use.
template <class Self>
void start_loop(Self* self, const model::model_config& model, const std::string& owner,
                layout_ack_actor acks, int64_t stall_timeout_ms, shard_set shards,
                step_resources run, step_hooks hooks) {
  step_loop& l = self->state.loop;
  l.experts.owner = owner;
  l.experts.layout_layer.assign(static_cast<size_t>(model.num_layers), -1);
  const std::vector<int> moe = model.moe_layers();
  for (size_t i = 0; i < moe.size(); ++i)
    l.experts.layout_layer[static_cast<size_t>(moe[i])] = static_cast<int>(i);
  l.experts.acks = std::move(acks);
  l.experts.stall_timeout = std::chrono::milliseconds(stall_timeout_ms);
  l.run = std::move(run);
  l.hooks = std::move(hooks);
  adopt_shards(self, l.experts, std::move(shards));
}

template <class Self>
void continue_step(Self* self);

/// Asks for a step, keeping at most one such step_atom in the mailbox. A step whose shards are
/// all of this process runs whole inside one message, so every step_atom queued would run a
/// step of its own, and whatever waits behind them (a new shard set, a cancel) would wait that
/// many steps.
template <class Self>
void request_step(Self* self) {
  step_loop& l = self->state.loop;
  if (l.step_queued) return;
  l.step_queued = true;
  self->send(self, step_atom_v);
}

/// Sends the current layer's rows to the shards (again, after a failure with a newer set).
template <class Self>
void dispatch_current_layer(Self* self) {
  step_loop& l = self->state.loop;
  dispatch_layer(
      self, l.experts, *l.run.driver, l.step, &l.step, [self] { continue_step(self); },
      [self] { dispatch_current_layer(self); });
}

/// The step is over, done or abandoned: a layout that arrived meanwhile applies now.
template <class Self>
void end_step(Self* self) {
  step_loop& l = self->state.loop;
  l.busy = false;
  apply_pending_layout(self, l.experts);
  if (l.hooks.has_work()) request_step(self);
}

template <class Self>
void continue_step(Self* self) {
  step_loop& l = self->state.loop;
  if (l.run.driver->advance() == model::step_driver::state::need_experts) {
    return dispatch_current_layer(self);
  }
  l.hooks.step_done();
  ++l.steps_done;
  l.last_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - l.step_start)
          .count();
  l.total_ms += l.last_ms;
  end_step(self);
}

/// step_atom: runs a step if the worker is idle, has its shards and something to run.
template <class Self>
void try_step(Self* self) {
  step_loop& l = self->state.loop;
  l.step_queued = false;
  if (l.busy || l.experts.shards.shards.empty()) return;
  if (!l.hooks.fill_batch()) return;
  l.busy = true;
  ++l.step;
  l.step_start = std::chrono::steady_clock::now();
  l.run.driver->start(l.batch);
  continue_step(self);
}

/// tick_atom: a stalled step's timeout; the step is abandoned if it is still the stalled one.
template <class Self>
void on_stall_timeout(Self* self, uint64_t step) {
  step_loop& l = self->state.loop;
  if (!l.experts.stalled || l.step != step) return;
  l.hooks.step_abandoned("expert shard unavailable");
  l.experts.stalled = false;
  ++l.step;  // late expert answers of this step are ignored
  end_step(self);
}

/// shards_atom: a new shard set from the supervisor (others are logged and dropped).
template <class Self>
void on_shards(Self* self, shard_set& next, const model::model_config& model) {
  step_loop& l = self->state.loop;
  if (!acceptable_shards(self, l.experts, next, model)) return;
  if (receive_shards(self, l.experts, std::move(next), l.busy)) {
    return dispatch_current_layer(self);
  }
  request_step(self);
}

/// rebind_atom: the supervisor's fresh handle after a lost contact came back. False (and
/// nothing changes) when the message did not come from the worker's supervisor.
template <class Self>
bool rebind_supervisor(Self* self, layout_ack_actor acks) {
  step_loop& l = self->state.loop;
  if (!sent_by(self->current_sender(), l.experts.acks)) return false;
  l.experts.acks = std::move(acks);
  return true;
}

/// The loop's part of a worker's status.
inline role_status loop_status(const step_loop& l, const std::string& name, const char* role) {
  role_status out;
  out.name = name;
  out.role = role;
  out.last_step_ms = l.last_ms;
  out.steps = l.steps_done;
  return out;
}

}  // namespace brigade::actors

#include "actors/local_experts.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <utility>

namespace brigade::actors {

std::optional<local_failure> run_local_calls(const std::vector<local_call>& calls, uint64_t step,
                                             uint64_t caller, uint64_t epoch,
                                             model::step_driver& driver,
                                             const caf::strong_actor_ptr& sender,
                                             local_scratch& scratch) {
  const auto start = std::chrono::steady_clock::now();
  // Every call's rows are taken before any is computed: a refusal delivers nothing. Shards on
  // the worker's own device compute in place, from the layer's inputs to its outputs, as the
  // engine does; others through host rows (`host_slots`, every such call's rows one after
  // another; each core's groups point into that order), the calls on one device together.
  gpu::backend& own = driver.device();
  std::vector<std::vector<slot_rows>> taken(calls.size());
  std::vector<int32_t> host_slots;
  for (size_t k = 0; k < calls.size(); ++k) {
    const local_call& call = calls[k];
    due_samples due;
    auto groups =
        call.core->take_rows({step, caller, epoch, driver.layer(), &call.physical}, sender, due);
    // The samples go out as the shard's own: the supervisor takes loads only from the shards.
    for (load_sample& sample : due.samples) {
      if (due.sink) caf::send_as(call.handle, due.sink, std::move(sample));
    }
    if (!groups) return local_failure{call.shard, groups.err().message};
    taken[k] = std::move(groups.value());
  }
  std::vector<model::expert_rows> in_place;
  std::map<const model_context*, std::vector<slot_rows>> by_device;
  for (size_t k = 0; k < calls.size(); ++k) {
    const local_call& call = calls[k];
    if (call.core->ctx->dev.get() == &own) {
      for (const slot_rows& g : taken[k]) {
        model::expert_rows e{g.weights.get(), {}};
        e.slots.reserve(g.rows.size());
        for (const int32_t row : g.rows)
          e.slots.push_back(call.step_slots[static_cast<size_t>(row)]);
        in_place.push_back(std::move(e));
      }
      continue;
    }
    const auto base = static_cast<int32_t>(host_slots.size());
    host_slots.insert(host_slots.end(), call.step_slots.begin(), call.step_slots.end());
    std::vector<slot_rows>& into = by_device[call.core->ctx.get()];
    for (slot_rows& g : taken[k]) {
      for (int32_t& row : g.rows)
        row += base;
      into.push_back(std::move(g));
    }
    if (scratch.devices.find(call.core->ctx.get()) == scratch.devices.end()) {
      scratch.devices[call.core->ctx.get()].ctx = call.core->ctx;
    }
  }
  if (!in_place.empty()) driver.run_experts(in_place);
  if (!host_slots.empty()) {
    driver.input_rows(host_slots, scratch.input);
    scratch.output.resize(scratch.input.size());
    for (const auto& [ctx, groups] : by_device) {
      local_scratch::on_device& d = scratch.devices.at(ctx);
      run_slot_rows(*ctx->dev, d.ffn, ctx->config, groups, scratch.input.data(),
                    scratch.output.data());
    }
    driver.deliver(host_slots, scratch.output.data());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const local_call& call : calls)
    call.core->finished(ms);
  return std::nullopt;
}

}  // namespace brigade::actors

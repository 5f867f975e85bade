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
  // Every call's rows one after another; each core's groups point into that order. Calls on
  // the same device compute together.
  std::vector<int32_t> all_slots;
  std::map<const model_context*, std::vector<slot_rows>> by_device;
  for (const local_call& call : calls) {
    due_samples due;
    auto groups =
        call.core->take_rows({step, caller, epoch, driver.layer(), &call.physical}, sender, due);
    // The samples go out as the shard's own: the supervisor takes loads only from the shards.
    for (load_sample& sample : due.samples) {
      if (due.sink) caf::send_as(call.handle, due.sink, std::move(sample));
    }
    if (!groups) return local_failure{call.shard, groups.err().message};
    const auto base = static_cast<int32_t>(all_slots.size());
    all_slots.insert(all_slots.end(), call.step_slots.begin(), call.step_slots.end());
    std::vector<slot_rows>& into = by_device[call.core->ctx.get()];
    for (slot_rows& g : groups.value()) {
      for (int32_t& row : g.rows)
        row += base;
      into.push_back(std::move(g));
    }
    if (scratch.devices.find(call.core->ctx.get()) == scratch.devices.end()) {
      scratch.devices[call.core->ctx.get()].ctx = call.core->ctx;
    }
  }
  driver.input_rows(all_slots, scratch.input);
  scratch.output.resize(scratch.input.size());
  for (const auto& [ctx, groups] : by_device) {
    local_scratch::on_device& d = scratch.devices.at(ctx);
    run_slot_rows(*ctx->dev, d.ffn, ctx->config, groups, scratch.input.data(),
                  scratch.output.data());
  }
  driver.deliver(all_slots, scratch.output.data());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const local_call& call : calls)
    call.core->finished(ms);
  return std::nullopt;
}

}  // namespace brigade::actors

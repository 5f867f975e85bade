// Sending one MoE layer's routed rows to the expert shards and collecting the answers. Shared by
// the prefill and decode workers; included by their .cpp files only.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <memory>

#include "actors/shard_set.hpp"
#include "model/step_driver.hpp"

namespace brigade::actors {

/// How long a worker waits for an expert shard before failing the step. Liveness comes from
/// monitors (a dead shard answers at once); this bound only catches a hung one.
constexpr std::chrono::seconds expert_timeout{30};

/// Sends the rows of driver.layer() to the shards holding their experts. Calls done() with no
/// error once every answer is stored in the driver, or with the first error. `step` identifies
/// the step; answers arriving when *current_step has moved on are dropped.
template <class Self>
void dispatch_layer(Self* self, model::step_driver& driver, const shard_set& set, uint64_t step,
                    const uint64_t* current_step, std::function<void(const caf::error&)> done) {
  const model::routing& r = driver.routes();
  const expert_layout& layout = *set.layout;
  const int layer = driver.layer();
  const size_t shards = set.shards.size();
  std::vector<std::vector<int32_t>> step_slots(shards), phys(shards);
  for (int slot = 0; slot < r.tokens * r.top_k; ++slot) {
    const int expert = r.experts[static_cast<size_t>(slot)];
    const int32_t phy = layout.slot_for(layer, expert, slot / r.top_k);
    const size_t shard = static_cast<size_t>(layout.shard_of(phy));
    step_slots[shard].push_back(slot);
    phys[shard].push_back(phy);
  }
  struct progress {
    int pending = 0;
    bool failed = false;
  };
  auto p = std::make_shared<progress>();
  for (size_t s = 0; s < shards; ++s) p->pending += step_slots[s].empty() ? 0 : 1;
  auto shared_done = std::make_shared<std::function<void(const caf::error&)>>(std::move(done));
  for (size_t s = 0; s < shards; ++s) {
    if (step_slots[s].empty()) continue;
    expert_request req;
    req.step = step;
    req.layer = layer;
    req.slots = std::move(phys[s]);
    driver.input_rows(step_slots[s], req.input.data);
    req.input.rows = static_cast<int32_t>(req.slots.size());
    req.input.cols = static_cast<int32_t>(req.input.data.size() / req.slots.size());
    auto slots = std::make_shared<std::vector<int32_t>>(std::move(step_slots[s]));
    model::step_driver* d = &driver;
    self->request(set.shards[s], expert_timeout, std::move(req))
        .then(
            [=](expert_reply& reply) {
              if (p->failed || *current_step != step) return;
              d->deliver(*slots, reply.output.data.data());
              if (--p->pending == 0) (*shared_done)(caf::error{});
            },
            [=](caf::error& err) {
              if (p->failed || *current_step != step) return;
              p->failed = true;
              (*shared_done)(err);
            });
  }
}

}  // namespace brigade::actors

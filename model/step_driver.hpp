// A forward step whose expert FFNs run elsewhere (on expert shards), driven one layer at a time
// by its owner. The owner never blocks: it sends the routed rows out and resumes the step when
// every answer has arrived.
//
//   start(batch) -> advance() == need_experts -> [send input_rows(), deliver(...) per answer]
//                -> advance() == need_experts -> ... -> advance() == done -> logits()
//
// Each state change does exactly the work run_step() does in one process, so a step driven here
// gives the same bits as the single-process engine.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "model/step_batch.hpp"
#include "model/transformer.hpp"
#include "model/workspace.hpp"

namespace brigade::model {

class step_driver {
 public:
  enum class state { idle, need_experts, done };

  step_driver(const transformer& t, gpu::kv_storage& kv, workspace& ws);

  /// Begins a step over `b`, which must stay unchanged until the step is done.
  void start(const step_batch& b);
  /// Runs until the next MoE layer needs its experts, or to the end of the step.
  state advance();
  state current() const { return state_; }

  /// The MoE layer waiting for experts, and its routing.
  int layer() const { return layer_; }
  const routing& routes() const { return routing_; }
  /// The expert inputs of `slots` (slot = token * top_k + choice), row after row.
  void input_rows(const std::vector<int32_t>& slots, std::vector<float>& out) const;
  /// Stores the expert outputs of `slots`, row after row.
  void deliver(const std::vector<int32_t>& slots, const float* rows);
  /// Computes the slots of `experts`, whose weights are on the step's own device, where the
  /// layer's inputs and outputs are (run_expert_rows): the engine's path, with no copy through
  /// the host. For the expert shards of the worker's own process.
  void run_experts(const std::vector<expert_rows>& experts);
  /// Where the step runs.
  gpu::backend& device() const { return t_.device(); }

  /// Host logits of the rows the batch asked for, once the step is done.
  const std::vector<float>& logits() const { return logits_; }

 private:
  const transformer& t_;
  gpu::kv_storage& kv_;
  workspace& ws_;
  const step_batch* batch_ = nullptr;
  state state_ = state::idle;
  int layer_ = 0;
  routing routing_;
  // The routed layer's expert inputs on the host, downloaded when input_rows first needs them.
  mutable std::vector<float> h_host_;
  mutable bool h_host_current_ = false;
  gpu::activation staging_;  // expert outputs on their way into ws.expert_out
  std::vector<float> logits_;
};

}  // namespace brigade::model

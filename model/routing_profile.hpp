// Which experts a prompt's tokens are routed to: the forward pass of its prefill in one process,
// with each MoE layer's routing counted. Workloads with a known expert skew are built from it
// (bench/skewed_workload.hpp): a prompt's routing is a property of the model, measured, not
// assumed.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.hpp"
#include "model/loaded_model.hpp"

namespace brigade::model {

/// Tokens routed to each expert when `prompt` is prefilled: [MoE layer][expert], MoE layers in
/// model order (dense layers skipped). `m` must hold its experts. Fails on an empty prompt, ids
/// outside the vocabulary or a prompt past the context.
result<std::vector<std::vector<int64_t>>> profile_routing(const loaded_model& m, gpu::backend& dev,
                                                          const std::vector<int32_t>& prompt);

}  // namespace brigade::model

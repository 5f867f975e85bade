// Speculative decoding's Prometheus counters, the same for the engine service and the topology.
#pragma once

#include "common/metrics.hpp"
#include "model/speculation.hpp"

namespace brigade::serve {

/// Sets brigade_speculative_{draft,accepted}_tokens_total, and the same by draft position
/// (..._by_position_total{position="i"}), to the given totals. A total that went down (a decode
/// worker restarted with fresh counts) leaves its counter where it was. Once a confidence head
/// judged a draft, also its calibration per bucket of the prediction ("0.3-0.4"):
/// brigade_speculative_calibration_{drafts,predicted,kept}_total{bucket="..."}.
void collect_speculation_metrics(const model::speculation_stats& totals, metrics::registry& into);

}  // namespace brigade::serve

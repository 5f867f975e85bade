// The actor topology's overhead: the mean decode step time through the topology (decode worker,
// expert shards, messages) over the single-process engine's on the same batch, in one run.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::bench {

struct overhead_figures {
  int batch = 0;
  int steps = 0;
  int rounds = 0;  ///< Alternating rounds of each; the figures are medians.
  double engine_step_ms = 0;
  double topology_step_ms = 0;
  double ratio() const { return topology_step_ms / engine_step_ms; }
};

/// Decodes `batch` sequences for `steps` steps in the engine, then in the default topology
/// (one prefill and one decode worker, `shards` expert shards) on the same model, in alternating
/// rounds.
result<overhead_figures> measure_actor_overhead(const std::string& model_dir, int batch, int steps,
                                                int shards);

}  // namespace brigade::bench

// `brigade bench engine --compare-paths`: the engine and the expert FFN kernel on every CPU kernel
// path this machine has, side by side in one run.
#pragma once

#include <string>

#include "model/model_writer.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::bench {

struct path_comparison_options {
  int rounds = 5;                 ///< Rounds; each measures every phase once per path.
  int decode_steps = 32;          ///< Timed decode steps per decode measurement.
  bool as_json = false;           ///< One JSON object instead of the table.
  std::string shape = "default";  ///< The benchmark model's shape (engine_model.hpp).
};

/// Measures prefill of a 512-token prompt, decode at batch 1 and 8, and the expert FFN kernel at
/// 1, 8 and 512 rows on each available path, each path with the benchmark model from `work_dir`
/// loaded onto a backend of its own (a loaded model runs its forward pass on the backend it was
/// loaded onto). Paths alternate within each phase, in an order that
/// reverses every round, so drift in the machine's speed falls on all paths alike. Prints each
/// path's median (min-max) and each path's ratio to the AVX2 path: the median of the per-round
/// ratios. Returns the process exit code.
int compare_kernel_paths(const std::string& work_dir, const model::model_spec& spec,
                         thread_pool& pool, const path_comparison_options& opt);

}  // namespace brigade::bench

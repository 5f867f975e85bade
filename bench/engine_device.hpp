// `brigade bench engine --device cuda:N`: the engine's prefill and decode on a device other than
// the CPU, beside the bounds of that device (device_bound.hpp): decode at batch 1, 64 and 256
// against what its memory bandwidth allows, prefill of a 512-token prompt against what its bf16
// FLOP rate allows. The measurements are the CPU run's (engine_measure.hpp) on another backend.
#pragma once

#include <string>

#include "bench/device_bound.hpp"
#include "gpu/backend.hpp"

namespace brigade::bench {

struct device_bench_options {
  std::string model_dir;  ///< A checkpoint to measure; empty: the benchmark model of `shape`.
  std::string work_dir;   ///< Where the benchmark model is kept.
  std::string shape = "default";
  device_peaks peaks;
  bool quick = false;  ///< Fewer trials and decode steps (for smoke runs).
  bool as_json = false;
};

/// Loads the model onto `dev`, measures, and prints a table (or one JSON object) of each figure,
/// its bound and its share of the bound. Returns the process exit code.
int bench_engine_on_device(gpu::backend& dev, const device_bench_options& options);

}  // namespace brigade::bench

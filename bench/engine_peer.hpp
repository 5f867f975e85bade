// `brigade bench engine --peer llamacpp`: brigade beside llama.cpp on the same benchmark model,
// on this CPU, in one run.
//
// The benchmark model (engine_model.hpp, the shape `--shape` names) is converted to GGUF
// (peers/llamacpp/qwen3moe_gguf.hpp) and run by a llama.cpp driver process, built against
// llama.cpp's prebuilt libraries (peers/llamacpp/toolchain.hpp). Before measuring, llama.cpp's
// greedy tokens must start as brigade's do. Then brigade and each llama.cpp CPU variant (the
// best one for this CPU, and the AVX2 "haswell" build) take turns, in an order that reverses
// every round: prefill of a 512-token prompt, decode at batch 1 and at batch 8.
#pragma once

#include <string>

#include "gpu/cpu/kernel_path.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::bench {

struct peer_options {
  std::string peer = "llamacpp";  ///< The only peer there is.
  std::string shape = "default";  ///< The benchmark model's shape (engine_model.hpp).
  std::string work_dir;           ///< Where the model and its GGUF are kept.
  std::string toolchain_dir;      ///< Where npm, the headers and the driver go; empty: default.
  gpu::cpu::kernel_path path = gpu::cpu::kernel_path::avx2;  ///< brigade's CPU kernel path
  int rounds = 5;         ///< Each measures every phase once on every side.
  int decode_steps = 32;  ///< Timed decode steps per decode measurement.
  bool as_json = false;   ///< One JSON object instead of the tables.
};

/// Runs the comparison and prints it; returns the process exit code (1 when a tool is missing,
/// the conversion fails or llama.cpp's first greedy token differs from brigade's).
int compare_with_peer(const peer_options& opt, thread_pool& pool);

}  // namespace brigade::bench

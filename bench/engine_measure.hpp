// The measurements behind `brigade bench engine`: the expert FFN kernel beside OpenBLAS, and the
// engine's prefill and decode speed on one backend.
#pragma once

#include <algorithm>
#include <chrono>

#include "bench/openblas_loader.hpp"
#include "gpu/backend.hpp"
#include "gpu/cpu/kernel_path.hpp"
#include "model/loaded_model.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::bench {

/// Runs fn repeatedly for at least min_s and returns the best seconds per call of `trials` trials.
template <class F>
double best_time(F&& fn, double min_s = 0.05, int trials = 5) {
  using clock = std::chrono::steady_clock;
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    int calls = 0;
    const auto start = clock::now();
    double elapsed_s = 0.0;
    do {
      fn();
      ++calls;
      elapsed_s = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed_s < min_s);
    best = std::min(best, elapsed_s / calls);
  }
  return best;
}

/// The expert FFN (gate_up, SiLU, down) on `rows` tokens, in GFLOP/s.
struct ffn_figures {
  int rows = 0;
  double ours_bf16_gflops = 0, ours_f32_gflops = 0;
  double openblas_gflops = 0;  ///< 0 when not measured.
};

/// Our kernel on `path` with bf16 and f32 weights, and OpenBLAS sgemm when `blas` is given.
ffn_figures measure_ffn(int rows, int hidden, int inter, thread_pool& pool,
                        gpu::cpu::kernel_path path, const openblas* blas);

/// Prefill tokens per second of one `tokens`-long prompt in a single step, best of `trials`.
double prefill_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int tokens,
                            int trials);

/// Microseconds one parallel_for of `pool` takes on a job of four empty chunks per thread: the
/// hand-off alone, which decode pays some 90 times a step at batch 1.
double pool_handoff_us(thread_pool& pool);

/// The prompt length of every sequence decode_tokens_per_s decodes.
constexpr int decode_prompt_tokens = 32;

/// Decode tokens per second with `batch` sequences of `prompt_tokens`-long prompts decoding
/// together, over `steps` steps after every sequence has its first token, keys and values held in
/// `kv` elements.
double decode_tokens_per_s(const model::loaded_model& m, gpu::backend& dev, int batch, int steps,
                           int prompt_tokens = decode_prompt_tokens,
                           gpu::dtype kv = gpu::dtype::f32);

}  // namespace brigade::bench

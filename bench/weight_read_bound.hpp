// A bound on decode at batch 1 that holds on this machine: how fast the weights one token reads
// can be read, measured the way the kernels read them.
//
// A copy-bandwidth figure is no bound where the weights a step reads partly stay in the
// last-level cache between steps (small models) or where one core cannot draw the machine's
// bandwidth. This reads, per simulated decode step, the matrices a token reads (attention, the
// router, top_k experts of each MoE layer, the output head), in decode's order, each split over
// the pool's threads in the gemm's work items (4 panels each), with a plain reduction instead of
// multiply-adds.
//
// With the same experts at every step, as many of those bytes as can stay in the caches do: no
// decode step reads its weights faster, so that figure is the bound. Decode also computes, and
// its tokens route to other experts from step to step. With experts drawn at random per step the
// figure is what a decode whose routing has no locality at all could reach; real routing lies
// between the two. (KV reads, small at short contexts, are left out of both.)
#pragma once

#include "model/loaded_model.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::bench {

struct weight_read_figures {
  double bytes_per_step = 0;    ///< Weight bytes one decode step reads at batch 1 (mean).
  double seconds_per_step = 0;  ///< Best of several timed runs, per step.
  double bytes_per_s() const { return bytes_per_step / seconds_per_step; }
  double tokens_per_s() const { return 1.0 / seconds_per_step; }
};

enum class expert_draw {
  same,    ///< The same top_k experts of each layer at every step: the bound.
  random,  ///< top_k experts drawn at random per layer and step: no routing locality.
};

/// Reads `steps` simulated decode steps' weights of `m` (loaded with every expert on the CPU
/// backend) on `pool`; the best of `trials`.
weight_read_figures measure_weight_reads(const model::loaded_model& m, thread_pool& pool,
                                         expert_draw draw, int steps, int trials);

}  // namespace brigade::bench

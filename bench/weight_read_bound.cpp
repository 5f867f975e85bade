#include "bench/weight_read_bound.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "gpu/cpu/packed_matrix.hpp"
#include "gpu/dtype.hpp"

namespace brigade::bench {
namespace {

constexpr int panels_per_item = 4;  // As gpu/cpu/gemm.cpp splits a matrix.

const gpu::cpu::packed_matrix& packed(const gpu::matrix& w) {
  const auto* p = dynamic_cast<const gpu::cpu::packed_matrix*>(&w);
  if (!p) throw std::invalid_argument("the weight-read bound needs the CPU backend's matrices");
  return *p;
}

// Sums the 64-bit words of [p, p + bytes): the compiler vectorises it into wide loads, and the
// result is kept so that the reads cannot be optimised away.
uint64_t read_words(const unsigned char* p, size_t bytes) {
  uint64_t acc[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    for (int j = 0; j < 4; ++j)
      acc[j] += w[j];
  }
  for (; i < bytes; ++i)
    acc[0] += p[i];
  return acc[0] + acc[1] + acc[2] + acc[3];
}

// Reads one matrix as gemm() would split it for one row.
uint64_t read_matrix(const gpu::cpu::packed_matrix& w, thread_pool& pool) {
  const int panels = w.panels();
  const size_t panel_bytes =
      static_cast<size_t>(w.cols()) * gpu::cpu::panel_width * gpu::dtype_size(w.type());
  const size_t items = static_cast<size_t>((panels + panels_per_item - 1) / panels_per_item);
  const double work_per_item =
      static_cast<double>(w.cols()) * gpu::cpu::panel_width * panels_per_item;
  const size_t grain = static_cast<size_t>(
      std::max(1.0, gpu::cpu::item_multiply_adds() / std::max(1.0, work_per_item)));
  std::vector<uint64_t> sums(items, 0);
  pool.parallel_for(items, grain, [&](size_t begin, size_t end) {
    for (size_t item = begin; item < end; ++item) {
      const int p0 = static_cast<int>(item) * panels_per_item;
      const int p1 = std::min(panels, p0 + panels_per_item);
      sums[item] = read_words(static_cast<const unsigned char*>(w.panel(p0)),
                              panel_bytes * static_cast<size_t>(p1 - p0));
    }
  });
  return std::accumulate(sums.begin(), sums.end(), uint64_t{0});
}

void add(std::vector<const gpu::cpu::packed_matrix*>& out, const gpu::matrix* w) {
  if (w) out.push_back(&packed(*w));
}

void add_ffn(std::vector<const gpu::cpu::packed_matrix*>& out, const model::ffn_weights& f) {
  add(out, f.gate_up.get());
  add(out, f.down.get());
}

// The matrices of one decode step at batch 1, in the order decode reads them.
std::vector<const gpu::cpu::packed_matrix*> step_matrices(const model::loaded_model& m,
                                                          std::mt19937& rng) {
  const model::model_config& c = m.config;
  std::vector<const gpu::cpu::packed_matrix*> out;
  std::vector<int> experts(static_cast<size_t>(std::max(1, c.num_experts)));
  for (int l = 0; l < c.num_layers; ++l) {
    const model::layer_weights& lw = m.dense->layers[static_cast<size_t>(l)];
    add(out, lw.attn.qkv.get());
    const model::latent_attention_weights& la = lw.attn.latent;
    add(out, la.q_a.get());
    add(out, la.q_b.get());
    add(out, la.kv_a.get());
    for (const auto& q : la.q_absorb)
      add(out, q.get());
    for (const auto& v : la.v_up)
      add(out, v.get());
    add(out, lw.attn.o.get());
    if (!c.is_moe_layer(l)) {
      add_ffn(out, lw.dense);
      continue;
    }
    add(out, lw.router.get());
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int k = 0; k < c.top_k; ++k) {
      const model::ffn_weights* f = m.experts->find(l, experts[static_cast<size_t>(k)]);
      if (f) add_ffn(out, *f);
    }
    add_ffn(out, lw.shared);
    add(out, lw.shared_gate.get());
  }
  add(out, &m.dense->output_matrix());
  return out;
}

}  // namespace

weight_read_figures measure_weight_reads(const model::loaded_model& m, thread_pool& pool,
                                         expert_draw draw, int steps, int trials) {
  if (!m.experts) throw std::invalid_argument("the weight-read bound needs every expert loaded");
  std::vector<std::vector<const gpu::cpu::packed_matrix*>> plan;
  double bytes = 0;
  for (int s = 0; s < steps; ++s) {
    // One generator per step for random draws; the same seed at every step for the same experts.
    std::mt19937 rng(draw == expert_draw::same ? 11u : 11u + static_cast<unsigned>(s));
    plan.push_back(step_matrices(m, rng));
    for (const auto* w : plan.back())
      bytes += static_cast<double>(w->bytes());
  }
  weight_read_figures f;
  f.bytes_per_step = bytes / steps;
  double best = 1e30;
  volatile uint64_t sink = 0;
  for (int t = 0; t < trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t sum = 0;
    for (const auto& step : plan)
      for (const auto* w : step)
        sum += read_matrix(*w, pool);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    sink = sink + sum;
  }
  f.seconds_per_step = best / steps;
  return f;
}

}  // namespace brigade::bench

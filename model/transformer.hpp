// The forward pass, written as the steps that actors split between them:
//
//   embed -> for each layer: attention -> (dense MLP | route -> expert FFNs -> combine) -> logits
//
// A decode worker runs attention, route and combine; expert shards run expert FFNs on the rows
// routed to them. run_step() runs them all in one process: the single-process engine and the
// reference every topology must reproduce.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "model/config.hpp"
#include "model/step_batch.hpp"
#include "model/weights.hpp"
#include "model/workspace.hpp"

namespace brigade::model {

/// The experts chosen for each token of a step: slot t * top_k + j is token t's j-th choice, in
/// descending order of router probability.
struct routing {
  int tokens = 0;
  int top_k = 0;
  std::vector<int32_t> experts;
  std::vector<float> weights;

  /// Slots routed to each expert, in increasing slot order: the groups expert FFNs run on.
  std::vector<std::vector<int32_t>> groups(int num_experts) const;
};

class transformer {
 public:
  transformer(const model_config& c, gpu::backend& dev, const dense_weights& w);

  const model_config& config() const { return config_; }
  gpu::backend& device() const { return dev_; }
  const dense_weights& weights() const { return w_; }

  /// ws.x = embeddings of the batch's tokens.
  void embed(const step_batch& b, workspace& ws) const;
  /// ws.x += attention(input_norm(ws.x)); stores the batch's keys and values in `kv`.
  void attention(int layer, const step_batch& b, gpu::kv_storage& kv, workspace& ws) const;
  /// ws.x += mlp(post_norm(ws.x)) for a dense layer.
  void dense_mlp(int layer, const step_batch& b, workspace& ws) const;
  /// ws.h = post_norm(ws.x); `r` = each token's experts and weights.
  void route(int layer, const step_batch& b, workspace& ws, routing& r) const;
  /// ws.x += sum of the weighted expert outputs in ws.expert_out (+ the shared expert).
  void combine(int layer, const step_batch& b, workspace& ws, const routing& r) const;
  /// Host logits [b.logit_rows().size(), vocab] of the rows the batch asked for.
  void logits(const step_batch& b, workspace& ws, std::vector<float>& out) const;

 private:
  void ffn(const ffn_weights& w, const gpu::tensor& in, const gpu::tensor& out,
           workspace& ws) const;
  /// DeepSeek-V3's attention (model/latent_attention.cpp).
  void latent_attention(int layer, const step_batch& b, gpu::kv_storage& kv, workspace& ws) const;

  const model_config& config_;
  gpu::backend& dev_;
  const dense_weights& w_;
};

/// out = down(silu(gate(in)) * up(in)); gate_up and inter are scratch with in.rows rows.
void run_ffn(gpu::backend& dev, const ffn_weights& w, const gpu::tensor& in, const gpu::tensor& out,
             const gpu::tensor& gate_up, const gpu::tensor& inter);

/// One expert of run_ffn_group: `rows` consecutive rows of its input through `weights`.
struct ffn_part {
  const ffn_weights* weights = nullptr;
  int rows = 0;
};

/// run_ffn of every part on its rows of `in` (the parts' rows one after another, in order) into
/// the same rows of `out`: the same bits as one run_ffn each, with each matmul of all the parts
/// handed to the device at once. The parts share one intermediate size; gate_up and inter are
/// scratch with in.rows rows.
void run_ffn_group(gpu::backend& dev, const std::vector<ffn_part>& parts, const gpu::tensor& in,
                   const gpu::tensor& out, const gpu::tensor& gate_up, const gpu::tensor& inter);

/// One expert's routed slots of a layer (slot = token * top_k + choice), and its weights.
struct expert_rows {
  const ffn_weights* weights = nullptr;
  std::vector<int32_t> slots;
};

/// Runs each expert's slots on `dev`: their rows of ws.h gathered in the experts' order, through
/// run_ffn_group in batches of at most workspace::expert_group_rows rows, and scattered into
/// ws.expert_out at their slots. The bits do not depend on the experts' order or batches.
void run_expert_rows(gpu::backend& dev, const routing& r, const std::vector<expert_rows>& experts,
                     workspace& ws);

/// Runs the expert FFNs of one layer locally: every routed row of ws.h through its expert, the
/// results into ws.expert_out at its slot.
void run_local_experts(const transformer& t, const expert_bank& experts, int layer,
                       const routing& r, workspace& ws);

/// A whole forward step in one process. Returns host logits as transformer::logits does.
void run_step(const transformer& t, const expert_bank& experts, gpu::kv_storage& kv, workspace& ws,
              const step_batch& b, std::vector<float>& logits);

}  // namespace brigade::model

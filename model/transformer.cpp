#include "model/transformer.hpp"

#include "model/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace brigade::model {
namespace {

float* data(const std::unique_ptr<gpu::buffer>& b) {
  return b ? static_cast<float*>(b->data()) : nullptr;
}

}  // namespace

std::vector<std::vector<int32_t>> routing::groups(int num_experts) const {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(num_experts));
  for (size_t slot = 0; slot < experts.size(); ++slot) {
    out[static_cast<size_t>(experts[slot])].push_back(static_cast<int32_t>(slot));
  }
  return out;
}

transformer::transformer(const model_config& c, gpu::backend& dev, const dense_weights& w)
    : config_(c), dev_(dev), w_(w) {}

void transformer::embed(const step_batch& b, workspace& ws) const {
  if (b.tokens() > ws.max_tokens()) {
    throw std::length_error("step of " + std::to_string(b.tokens()) +
                            " tokens exceeds the workspace (" + std::to_string(ws.max_tokens()) +
                            ")");
  }
  dev_.embed(*w_.embed, b.token_ids(), ws.x.first(b.tokens()));
}

void transformer::attention(int layer, const step_batch& b, gpu::kv_storage& kv,
                            workspace& ws) const {
  if (config_.mla.enabled()) return latent_attention(layer, b, kv, ws);
  const layer_weights& lw = w_.layers[static_cast<size_t>(layer)];
  const model_config& c = config_;
  const int t = b.tokens();
  const int q_cols = c.num_heads * c.head_dim;
  const int kv_cols = c.num_kv_heads * c.head_dim;
  const gpu::tensor x = ws.x.first(t);
  const gpu::tensor h = ws.h.first(t);
  dev_.rms_norm(x, data(lw.input_norm), c.hidden_size, c.rms_norm_eps, h);
  const gpu::tensor qkv = ws.qkv.first(t);
  dev_.matmul(h, *lw.attn.qkv, data(lw.attn.qkv_bias), qkv);
  const gpu::tensor q = qkv.cols_view(0, q_cols);
  const gpu::tensor k = qkv.cols_view(q_cols, kv_cols);
  const gpu::tensor v = qkv.cols_view(q_cols + kv_cols, kv_cols);
  if (c.qk_norm != qk_norm_kind::none) {
    const bool whole = c.qk_norm == qk_norm_kind::whole;
    dev_.rms_norm(q, data(lw.attn.q_norm), whole ? q_cols : c.head_dim, c.rms_norm_eps, q);
    dev_.rms_norm(k, data(lw.attn.k_norm), whole ? kv_cols : c.head_dim, c.rms_norm_eps, k);
  }
  // OLMoE clips after the q/k norms, before RoPE.
  if (c.clip_qkv > 0.0f) dev_.clamp(qkv, c.clip_qkv);
  dev_.rope(q, b.positions(), c.num_heads, c.head_dim, data(w_.rope_cos), data(w_.rope_sin));
  dev_.rope(k, b.positions(), c.num_kv_heads, c.head_dim, data(w_.rope_cos), data(w_.rope_sin));
  const gpu::attention_batch ab = b.attention();
  dev_.kv_write(kv, layer, k, v, ab);
  const gpu::tensor attn = ws.attn.first(t);
  dev_.attention(q, kv, layer, ab, c.num_heads, attention_scale(c), c.sliding_window, attn);
  const gpu::tensor proj = ws.proj.first(t);
  dev_.matmul(attn, *lw.attn.o, nullptr, proj);
  dev_.add(x, proj);
}

void transformer::ffn(const ffn_weights& w, const gpu::tensor& in, const gpu::tensor& out,
                      workspace& ws) const {
  const int rows = in.rows;
  run_ffn(dev_, w, in, out, ws.gate_up.view().rows_view(0, rows).cols_view(0, 2 * w.inter),
          ws.inter.view().rows_view(0, rows).cols_view(0, w.inter));
}

void transformer::dense_mlp(int layer, const step_batch& b, workspace& ws) const {
  const layer_weights& lw = w_.layers[static_cast<size_t>(layer)];
  const int t = b.tokens();
  const gpu::tensor x = ws.x.first(t);
  const gpu::tensor h = ws.h.first(t);
  dev_.rms_norm(x, data(lw.post_norm), config_.hidden_size, config_.rms_norm_eps, h);
  const gpu::tensor proj = ws.proj.first(t);
  ffn(lw.dense, h, proj, ws);
  dev_.add(x, proj);
}

void transformer::route(int layer, const step_batch& b, workspace& ws, routing& r) const {
  const layer_weights& lw = w_.layers[static_cast<size_t>(layer)];
  const int t = b.tokens();
  const gpu::tensor h = ws.h.first(t);
  dev_.rms_norm(ws.x.first(t), data(lw.post_norm), config_.hidden_size, config_.rms_norm_eps, h);
  const gpu::tensor logits = ws.router.first(t);
  dev_.matmul(h, *lw.router, nullptr, logits);
  r.tokens = t;
  r.top_k = config_.top_k;
  r.experts.resize(static_cast<size_t>(t) * static_cast<size_t>(r.top_k));
  r.weights.resize(r.experts.size());
  gpu::router_spec spec;
  spec.top_k = config_.top_k;
  spec.normalize = config_.norm_topk_prob;
  spec.sigmoid = config_.sigmoid_router;
  spec.host_bias = lw.router_bias.empty() ? nullptr : lw.router_bias.data();
  spec.groups = config_.expert_groups;
  spec.top_groups = config_.topk_groups;
  spec.scale = config_.routed_scaling;
  dev_.router_topk(logits, spec, r.experts.data(), r.weights.data());
}

void transformer::combine(int layer, const step_batch& b, workspace& ws, const routing& r) const {
  const layer_weights& lw = w_.layers[static_cast<size_t>(layer)];
  const int t = b.tokens();
  const gpu::tensor y = ws.expert_out.first(t * r.top_k);
  if (lw.shared.gate_up) {
    const gpu::tensor h = ws.h.first(t);
    const gpu::tensor shared = ws.shared_out.first(t);
    const gpu::tensor gate = ws.shared_gate.first(t);
    ffn(lw.shared, h, shared, ws);
    if (!lw.shared_gate) {
      dev_.combine(ws.x.first(t), y, r.weights.data(), r.top_k, &shared, nullptr);
      return;
    }
    dev_.matmul(h, *lw.shared_gate, nullptr, gate);
    dev_.combine(ws.x.first(t), y, r.weights.data(), r.top_k, &shared, &gate);
  } else {
    dev_.combine(ws.x.first(t), y, r.weights.data(), r.top_k, nullptr, nullptr);
  }
}

void transformer::logits(const step_batch& b, workspace& ws, std::vector<float>& out) const {
  const std::vector<int32_t>& rows = b.logit_rows();
  const int n = static_cast<int>(rows.size());
  out.resize(static_cast<size_t>(n) * static_cast<size_t>(config_.vocab_size));
  if (n == 0) return;
  // ws.h holds the gathered rows, then their final norm in place.
  const gpu::tensor picked = ws.h.first(n);
  dev_.gather_rows(ws.x.first(b.tokens()), rows.data(), picked);
  dev_.rms_norm(picked, data(w_.final_norm), config_.hidden_size, config_.rms_norm_eps, picked);
  if (ws.logits.capacity_rows() < n) ws.logits = dev_.alloc(n, config_.vocab_size);
  const gpu::tensor result = ws.logits.first(n);
  dev_.matmul(picked, w_.output_matrix(), nullptr, result);
  dev_.download(result, out.data());
}

void run_ffn(gpu::backend& dev, const ffn_weights& w, const gpu::tensor& in, const gpu::tensor& out,
             const gpu::tensor& gate_up, const gpu::tensor& inter) {
  dev.matmul(in, *w.gate_up, nullptr, gate_up);
  dev.silu_mul(gate_up, inter);
  dev.matmul(inter, *w.down, nullptr, out);
}

void run_ffn_group(gpu::backend& dev, const std::vector<ffn_part>& parts, const gpu::tensor& in,
                   const gpu::tensor& out, const gpu::tensor& gate_up, const gpu::tensor& inter) {
  if (parts.empty()) return;
  const int width = parts.front().weights->inter;
  std::vector<gpu::matmul_job> jobs;
  jobs.reserve(parts.size());
  int row = 0;
  for (const ffn_part& p : parts) {
    if (p.weights->inter != width) {
      throw std::logic_error("run_ffn_group: experts of intermediate sizes " +
                             std::to_string(width) + " and " + std::to_string(p.weights->inter));
    }
    jobs.push_back(
        {in.rows_view(row, p.rows), p.weights->gate_up.get(), gate_up.rows_view(row, p.rows)});
    row += p.rows;
  }
  dev.grouped_matmul(jobs.data(), jobs.size());
  dev.silu_mul(gate_up.rows_view(0, row), inter.rows_view(0, row));
  row = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    jobs[i] = {inter.rows_view(row, parts[i].rows), parts[i].weights->down.get(),
               out.rows_view(row, parts[i].rows)};
    row += parts[i].rows;
  }
  dev.grouped_matmul(jobs.data(), jobs.size());
}

void run_expert_rows(gpu::backend& dev, const routing& r, const std::vector<expert_rows>& experts,
                     workspace& ws) {
  const int capacity = std::min(ws.group_in.capacity_rows(), workspace::expert_group_rows);
  // Experts run in batches of up to `capacity` rows (an expert with more runs alone): each
  // batch's rows are gathered in expert order, go through run_ffn_group, and are scattered back
  // to their slots.
  std::vector<ffn_part> parts;
  std::vector<int32_t> token_rows;
  std::vector<int32_t> slots;
  auto flush = [&] {
    const int m = static_cast<int>(slots.size());
    if (m == 0) return;
    const int width = parts.front().weights->inter;
    const gpu::tensor in = ws.group_in.first(m);
    const gpu::tensor out = ws.group_out.first(m);
    dev.gather_rows(ws.h.first(r.tokens), token_rows.data(), in);
    run_ffn_group(dev, parts, in, out, ws.gate_up.view().rows_view(0, m).cols_view(0, 2 * width),
                  ws.inter.view().rows_view(0, m).cols_view(0, width));
    dev.scatter_rows(out, slots.data(), ws.expert_out.first(r.tokens * r.top_k));
    parts.clear();
    token_rows.clear();
    slots.clear();
  };
  for (const expert_rows& e : experts) {
    const int m = static_cast<int>(e.slots.size());
    if (m == 0) continue;
    if (static_cast<int>(slots.size()) + m > capacity ||
        (!parts.empty() && parts.front().weights->inter != e.weights->inter)) {
      flush();
    }
    parts.push_back({e.weights, m});
    for (const int32_t slot : e.slots) {
      slots.push_back(slot);
      token_rows.push_back(slot / r.top_k);
    }
  }
  flush();
}

void run_local_experts(const transformer& t, const expert_bank& experts, int layer,
                       const routing& r, workspace& ws) {
  auto groups = r.groups(t.config().num_experts);
  std::vector<expert_rows> routed;
  for (size_t e = 0; e < groups.size(); ++e) {
    if (groups[e].empty()) continue;
    const ffn_weights* w = experts.find(layer, static_cast<int>(e));
    if (!w) {
      throw std::logic_error("expert " + std::to_string(e) + " of layer " + std::to_string(layer) +
                             " is not in this bank");
    }
    routed.push_back({w, std::move(groups[e])});
  }
  run_expert_rows(t.device(), r, routed, ws);
}

void run_step(const transformer& t, const expert_bank& experts, gpu::kv_storage& kv, workspace& ws,
              const step_batch& b, std::vector<float>& logits) {
  const model_config& c = t.config();
  t.embed(b, ws);
  routing r;
  for (int l = 0; l < c.num_layers; ++l) {
    t.attention(l, b, kv, ws);
    if (!c.is_moe_layer(l)) {
      t.dense_mlp(l, b, ws);
      continue;
    }
    t.route(l, b, ws, r);
    run_local_experts(t, experts, l, r, ws);
    t.combine(l, b, ws, r);
  }
  t.logits(b, ws, logits);
}

}  // namespace brigade::model

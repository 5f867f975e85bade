// DeepSeek-V3's multi-head latent attention, in the absorbed form.
//
// Per token the cache holds one row of cache_dim = kv_lora_rank + qk_rope_head_dim values: the
// normalised latent c and the rotated rope key k_pe, shared by every head (num_kv_heads 1). Head
// h's key would be [W_UK_h c, k_pe] and its value W_UV_h c; instead of computing them for every
// cached token, each head's query is turned once into a query against the cached row:
//
//   q_h . key_h = q_nope_h . (W_UK_h c) + q_pe_h . k_pe = (W_UK_h^T q_nope_h, q_pe_h) . (c, k_pe)
//
// and the attention-weighted sum of cached rows, whose first kv_lora_rank values are
// sum_s p_s c_s, goes through W_UV_h once: sum_s p_s W_UV_h c_s = W_UV_h sum_s p_s c_s. That is
// what makes a long context cheap: the cache is cache_dim floats per token and layer where full
// keys and values would be heads * (qk_head_dim + v_head_dim). The values the backend's
// attention reads are the cached rows themselves (written as both keys and values), so that the
// generic paged attention serves it; only their latent part is used. The result equals the
// expanded form up to float rounding (the numpy reference computes the expanded form).
#include <cstring>
#include <string>
#include <vector>

#include "model/rope_scaling.hpp"
#include "model/tensor_names.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace brigade::model {

namespace {

// The two low-rank norms (q_a_layernorm, kv_a_layernorm) use a fixed epsilon in DeepSeek-V3's
// own code and in Hugging Face's: rms_norm_eps reaches only the decoder layers' norms.
constexpr float latent_norm_eps = 1e-6f;

float* data(const std::unique_ptr<gpu::buffer>& b) {
  return b ? static_cast<float*>(b->data()) : nullptr;
}

// The rows of `m` reordered so that each rope block of `rope` rows starting at `firsts[i]` holds
// its even rows, then its odd ones: the checkpoint's interleaved pairs become rotate-half pairs.
std::vector<unsigned char> deinterleave_rope_rows(const gpu::host_matrix& m,
                                                  const std::vector<int>& firsts, int rope) {
  const size_t row_bytes = static_cast<size_t>(m.cols) * gpu::dtype_size(m.type);
  std::vector<unsigned char> out(static_cast<size_t>(m.rows) * row_bytes);
  std::memcpy(out.data(), m.data, out.size());
  const auto* in = static_cast<const unsigned char*>(m.data);
  for (int first : firsts) {
    for (int i = 0; i < rope; ++i) {
      const int from = i < rope / 2 ? 2 * i : 2 * (i - rope / 2) + 1;
      std::memcpy(out.data() + static_cast<size_t>(first + i) * row_bytes,
                  in + static_cast<size_t>(first + from) * row_bytes, row_bytes);
    }
  }
  return out;
}

float element(const gpu::host_matrix& m, int row, int col) {
  const size_t at =
      static_cast<size_t>(row) * static_cast<size_t>(m.cols) + static_cast<size_t>(col);
  switch (m.type) {
    case gpu::dtype::f32:
      return static_cast<const float*>(m.data)[at];
    case gpu::dtype::bf16:
      return gpu::bf16_to_f32(static_cast<const uint16_t*>(m.data)[at]);
    case gpu::dtype::f16:
      return gpu::f16_to_f32(static_cast<const uint16_t*>(m.data)[at]);
  }
  return 0.0f;
}

}  // namespace

status load_latent_attention(const checkpoint& ck, const model_config& c, gpu::backend& dev, int l,
                             latent_attention_weights& w) {
  const mla_dims& m = c.mla;
  const int hidden = c.hidden_size;
  const int heads = c.num_heads;
  const int qk = m.qk_head_dim();
  const int q_in = m.q_lora_rank > 0 ? m.q_lora_rank : hidden;
  if (m.q_lora_rank > 0) {
    auto qa = ck.matrix(names::layer(l, "self_attn.q_a_proj.weight"), m.q_lora_rank, hidden);
    if (!qa) return qa.err();
    w.q_a = dev.make_matrix(qa.value());
    auto norm = ck.vector(names::layer(l, "self_attn.q_a_layernorm.weight"), m.q_lora_rank);
    if (!norm) return norm.err();
    w.q_a_norm = dev.make_vector(norm->data(), norm->size());
  }
  auto qb = ck.matrix(
      names::layer(l, m.q_lora_rank > 0 ? "self_attn.q_b_proj.weight" : "self_attn.q_proj.weight"),
      heads * qk, q_in);
  if (!qb) return qb.err();
  std::vector<int> q_rope_rows;
  for (int h = 0; h < heads; ++h)
    q_rope_rows.push_back(h * qk + m.qk_nope_head_dim);
  const auto qb_rows = deinterleave_rope_rows(qb.value(), q_rope_rows, m.qk_rope_head_dim);
  w.q_b = dev.make_matrix({qb_rows.data(), qb->type, qb->rows, qb->cols});

  auto kva =
      ck.matrix(names::layer(l, "self_attn.kv_a_proj_with_mqa.weight"), m.cache_dim(), hidden);
  if (!kva) return kva.err();
  const auto kva_rows = deinterleave_rope_rows(kva.value(), {m.kv_lora_rank}, m.qk_rope_head_dim);
  w.kv_a = dev.make_matrix({kva_rows.data(), kva->type, kva->rows, kva->cols});
  auto kv_norm = ck.vector(names::layer(l, "self_attn.kv_a_layernorm.weight"), m.kv_lora_rank);
  if (!kv_norm) return kv_norm.err();
  w.kv_a_norm = dev.make_vector(kv_norm->data(), kv_norm->size());

  // kv_b_proj: per head, qk_nope_head_dim rows of W_UK then v_head_dim rows of W_UV, each
  // [kv_lora_rank] wide.
  const int per_head = m.qk_nope_head_dim + m.v_head_dim;
  auto kvb =
      ck.matrix(names::layer(l, "self_attn.kv_b_proj.weight"), heads * per_head, m.kv_lora_rank);
  if (!kvb) return kvb.err();
  const int cache = m.cache_dim();
  const size_t row_bytes = static_cast<size_t>(m.kv_lora_rank) * gpu::dtype_size(kvb->type);
  std::vector<float> absorb(static_cast<size_t>(cache) * static_cast<size_t>(qk));
  for (int h = 0; h < heads; ++h) {
    std::fill(absorb.begin(), absorb.end(), 0.0f);
    for (int i = 0; i < m.kv_lora_rank; ++i) {
      for (int j = 0; j < m.qk_nope_head_dim; ++j) {
        absorb[static_cast<size_t>(i) * static_cast<size_t>(qk) + static_cast<size_t>(j)] =
            element(kvb.value(), h * per_head + j, i);
      }
    }
    for (int i = 0; i < m.qk_rope_head_dim; ++i) {
      absorb[static_cast<size_t>(m.kv_lora_rank + i) * static_cast<size_t>(qk) +
             static_cast<size_t>(m.qk_nope_head_dim + i)] = 1.0f;
    }
    w.q_absorb.push_back(dev.make_matrix({absorb.data(), gpu::dtype::f32, cache, qk}));
    const auto* v_rows = static_cast<const unsigned char*>(kvb->data) +
                         static_cast<size_t>(h * per_head + m.qk_nope_head_dim) * row_bytes;
    w.v_up.push_back(dev.make_matrix({v_rows, kvb->type, m.v_head_dim, m.kv_lora_rank}));
  }
  return ok_status();
}

void transformer::latent_attention(int layer, const step_batch& b, gpu::kv_storage& kv,
                                   workspace& ws) const {
  const layer_weights& lw = w_.layers[static_cast<size_t>(layer)];
  const latent_attention_weights& la = lw.attn.latent;
  const model_config& c = config_;
  const mla_dims& m = c.mla;
  const int t = b.tokens();
  const int heads = c.num_heads;
  const int qk = m.qk_head_dim();
  const int cache = m.cache_dim();
  const int rope = m.qk_rope_head_dim;
  const gpu::tensor x = ws.x.first(t);
  const gpu::tensor h = ws.h.first(t);
  dev_.rms_norm(x, data(lw.input_norm), c.hidden_size, c.rms_norm_eps, h);
  // Scratch in ws.qkv: [queries | the tokens' cache rows | the low-rank query].
  const gpu::tensor scratch = ws.qkv.first(t);
  const gpu::tensor q = scratch.cols_view(0, heads * qk);
  const gpu::tensor row = scratch.cols_view(heads * qk, cache);
  if (la.q_a) {
    const gpu::tensor qa = scratch.cols_view(heads * qk + cache, m.q_lora_rank);
    dev_.matmul(h, *la.q_a, nullptr, qa);
    dev_.rms_norm(qa, data(la.q_a_norm), m.q_lora_rank, latent_norm_eps, qa);
    dev_.matmul(qa, *la.q_b, nullptr, q);
  } else {
    dev_.matmul(h, *la.q_b, nullptr, q);
  }
  dev_.matmul(h, *la.kv_a, nullptr, row);
  const gpu::tensor latent = row.cols_view(0, m.kv_lora_rank);
  dev_.rms_norm(latent, data(la.kv_a_norm), m.kv_lora_rank, latent_norm_eps, latent);
  const float* cos_t = data(w_.rope_cos);
  const float* sin_t = data(w_.rope_sin);
  dev_.rope(row.cols_view(m.kv_lora_rank, rope), b.positions(), 1, rope, cos_t, sin_t);
  for (int hd = 0; hd < heads; ++hd) {
    dev_.rope(q.cols_view(hd * qk + m.qk_nope_head_dim, rope), b.positions(), 1, rope, cos_t,
              sin_t);
  }
  const gpu::attention_batch ab = b.attention();
  dev_.kv_write(kv, layer, row, row, ab);
  // Each head's query against the cached rows, then attention over them.
  const gpu::tensor absorbed = ws.latent.first(t).cols_view(0, heads * cache);
  for (int hd = 0; hd < heads; ++hd) {
    dev_.matmul(q.cols_view(hd * qk, qk), *la.q_absorb[static_cast<size_t>(hd)], nullptr,
                absorbed.cols_view(hd * cache, cache));
  }
  const gpu::tensor attended = ws.attn.first(t);
  dev_.attention(absorbed, kv, layer, ab, heads, attention_scale(c), 0, attended);
  // Each head's attended latent through its value up-projection, then the output projection.
  const gpu::tensor values = ws.latent.first(t).cols_view(heads * cache, heads * m.v_head_dim);
  for (int hd = 0; hd < heads; ++hd) {
    dev_.matmul(attended.cols_view(hd * cache, m.kv_lora_rank), *la.v_up[static_cast<size_t>(hd)],
                nullptr, values.cols_view(hd * m.v_head_dim, m.v_head_dim));
  }
  const gpu::tensor proj = ws.proj.first(t);
  dev_.matmul(values, *lw.attn.o, nullptr, proj);
  dev_.add(x, proj);
}

}  // namespace brigade::model

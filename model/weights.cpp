#include "model/weights.hpp"

#include <cmath>

#include "model/rope_scaling.hpp"
#include "model/tensor_names.hpp"

namespace brigade::model {
namespace {

result<std::unique_ptr<gpu::buffer>> load_vector(const checkpoint& ck, gpu::backend& dev,
                                                 const std::string& name, int count) {
  auto v = ck.vector(name, count);
  if (!v) return v.err();
  return dev.make_vector(v->data(), v->size());
}

result<std::unique_ptr<gpu::matrix>> load_matrix(const checkpoint& ck, gpu::backend& dev,
                                                 const std::string& name, int rows, int cols) {
  auto m = ck.matrix(name, rows, cols);
  if (!m) return m.err();
  return dev.make_matrix(m.value());
}

// RoPE tables in double precision, rounded once: the angles of late positions stay accurate.
// With YaRN (DeepSeek-V3) the frequencies blend interpolated and original ones across a ramp of
// dimensions, and cos and sin carry the attention temperature (model/config.hpp).
void make_rope_tables(const model_config& c, gpu::backend& dev, dense_weights& w) {
  const int dims = c.mla.enabled() ? c.mla.qk_rope_head_dim : c.head_dim;
  const int half = dims / 2;
  const std::vector<double> inv_freq = rope_inverse_frequencies(c, dims);
  const double magnitude = rope_magnitude(c);
  std::vector<float> cos_t(static_cast<size_t>(c.max_positions) * static_cast<size_t>(half));
  std::vector<float> sin_t(cos_t.size());
  for (int i = 0; i < half; ++i) {
    for (int p = 0; p < c.max_positions; ++p) {
      const double angle = p * inv_freq[static_cast<size_t>(i)];
      const size_t at = static_cast<size_t>(p) * static_cast<size_t>(half) + static_cast<size_t>(i);
      cos_t[at] = static_cast<float>(std::cos(angle) * magnitude);
      sin_t[at] = static_cast<float>(std::sin(angle) * magnitude);
    }
  }
  w.rope_cos = dev.make_vector(cos_t.data(), cos_t.size());
  w.rope_sin = dev.make_vector(sin_t.data(), sin_t.size());
}

status load_attention(const checkpoint& ck, const model_config& c, gpu::backend& dev, int l,
                      attention_weights& a) {
  const int h = c.hidden_size;
  const int q_rows = c.num_heads * c.head_dim;
  const int kv_rows = c.num_kv_heads * c.head_dim;
  auto q = ck.matrix(names::layer(l, "self_attn.q_proj.weight"), q_rows, h);
  auto k = ck.matrix(names::layer(l, "self_attn.k_proj.weight"), kv_rows, h);
  auto v = ck.matrix(names::layer(l, "self_attn.v_proj.weight"), kv_rows, h);
  if (!q) return q.err();
  if (!k) return k.err();
  if (!v) return v.err();
  if (q->type != k->type || q->type != v->type) {
    return error(errc::unsupported, ck.dir() + ": layer " + std::to_string(l) +
                                        ": q/k/v projections have different dtypes");
  }
  a.qkv = dev.make_stacked_matrix({q.value(), k.value(), v.value()});
  if (c.qkv_bias) {
    std::vector<float> bias;
    for (const char* part : {"q", "k", "v"}) {
      const int rows = part[0] == 'q' ? q_rows : kv_rows;
      auto b = ck.vector(names::layer(l, std::string("self_attn.") + part + "_proj.bias"), rows);
      if (!b) return b.err();
      bias.insert(bias.end(), b->begin(), b->end());
    }
    a.qkv_bias = dev.make_vector(bias.data(), bias.size());
  }
  auto o = load_matrix(ck, dev, names::layer(l, "self_attn.o_proj.weight"), h, q_rows);
  if (!o) return o.err();
  a.o = std::move(o.value());
  if (c.qk_norm != qk_norm_kind::none) {
    const bool whole = c.qk_norm == qk_norm_kind::whole;
    auto qn = load_vector(ck, dev, names::layer(l, "self_attn.q_norm.weight"),
                          whole ? q_rows : c.head_dim);
    auto kn = load_vector(ck, dev, names::layer(l, "self_attn.k_norm.weight"),
                          whole ? kv_rows : c.head_dim);
    if (!qn) return qn.err();
    if (!kn) return kn.err();
    a.q_norm = std::move(qn.value());
    a.k_norm = std::move(kn.value());
  }
  return ok_status();
}

status load_layer(const checkpoint& ck, const model_config& c, gpu::backend& dev, int l,
                  layer_weights& w) {
  const int h = c.hidden_size;
  auto in_norm = load_vector(ck, dev, names::layer(l, "input_layernorm.weight"), h);
  auto post_norm = load_vector(ck, dev, names::layer(l, "post_attention_layernorm.weight"), h);
  if (!in_norm) return in_norm.err();
  if (!post_norm) return post_norm.err();
  w.input_norm = std::move(in_norm.value());
  w.post_norm = std::move(post_norm.value());
  status attn = c.mla.enabled() ? load_latent_attention(ck, c, dev, l, w.attn.latent)
                                : load_attention(ck, c, dev, l, w.attn);
  if (attn && c.mla.enabled()) {
    const int o_cols = c.num_heads * c.mla.v_head_dim;
    auto o = load_matrix(ck, dev, names::layer(l, "self_attn.o_proj.weight"), h, o_cols);
    if (!o) return o.err();
    w.attn.o = std::move(o.value());
  }
  if (!attn) return attn;
  if (!c.is_moe_layer(l)) {
    auto dense = load_ffn(
        ck, dev, [&](const std::string& p) { return names::dense_mlp(l, p); }, h,
        c.dense_intermediate);
    if (!dense) return dense.err();
    w.dense = std::move(dense.value());
    return ok_status();
  }
  auto router = load_matrix(ck, dev, names::router(c, l), c.num_experts, h);
  if (!router) return router.err();
  w.router = std::move(router.value());
  if (c.sigmoid_router) {
    auto bias = ck.vector(names::router_bias(l), c.num_experts);
    if (!bias) return bias.err();
    w.router_bias = std::move(bias.value());
  }
  if (c.shared_expert_intermediate > 0) {
    auto shared = load_ffn(
        ck, dev, [&](const std::string& p) { return names::shared_expert(c, l, p); }, h,
        c.shared_expert_intermediate);
    if (!shared) return shared.err();
    w.shared = std::move(shared.value());
    if (!c.shared_expert_gated) return ok_status();
    auto gate = load_matrix(ck, dev, names::shared_expert_gate(l), 1, h);
    if (!gate) return gate.err();
    w.shared_gate = std::move(gate.value());
  }
  return ok_status();
}

}  // namespace

result<ffn_weights> load_ffn(const checkpoint& ck, gpu::backend& dev,
                             const std::function<std::string(const std::string&)>& name, int hidden,
                             int inter) {
  auto gate = ck.matrix(name("gate"), inter, hidden);
  auto up = ck.matrix(name("up"), inter, hidden);
  if (!gate) return gate.err();
  if (!up) return up.err();
  if (gate->type != up->type) {
    return error(errc::unsupported, ck.dir() + ": '" + name("gate") + "' and '" + name("up") +
                                        "' have different dtypes");
  }
  auto down = load_matrix(ck, dev, name("down"), hidden, inter);
  if (!down) return down.err();
  ffn_weights w;
  w.gate_up = dev.make_stacked_matrix({gate.value(), up.value()});
  w.down = std::move(down.value());
  w.inter = inter;
  return w;
}

result<std::unique_ptr<dense_weights>> dense_weights::load(const checkpoint& ck,
                                                           const model_config& c, gpu::backend& dev,
                                                           const load_progress& progress) {
  auto w = std::make_unique<dense_weights>();
  auto embed = load_matrix(ck, dev, names::embed(), c.vocab_size, c.hidden_size);
  if (!embed) return embed.err();
  w->embed = std::move(embed.value());
  if (!c.tie_word_embeddings) {
    auto head = load_matrix(ck, dev, names::lm_head(), c.vocab_size, c.hidden_size);
    if (!head) return head.err();
    w->lm_head = std::move(head.value());
  }
  auto norm = load_vector(ck, dev, names::final_norm(), c.hidden_size);
  if (!norm) return norm.err();
  w->final_norm = std::move(norm.value());
  make_rope_tables(c, dev, *w);
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    status s = load_layer(ck, c, dev, l, w->layers[static_cast<size_t>(l)]);
    if (!s) return s.err();
    if (progress) progress(static_cast<size_t>(l + 1), static_cast<size_t>(c.num_layers));
  }
  return w;
}

std::vector<expert_bank::key> expert_bank::all_experts(const model_config& c) {
  std::vector<key> keys;
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    for (int e = 0; e < c.num_experts; ++e)
      keys.emplace_back(l, e);
  }
  return keys;
}

result<ffn_weights> expert_bank::load_one(const checkpoint& ck, const model_config& c,
                                          gpu::backend& dev, int layer, int expert) {
  return load_ffn(
      ck, dev, [&](const std::string& p) { return names::expert(c, layer, expert, p); },
      c.hidden_size, c.expert_intermediate);
}

result<std::unique_ptr<expert_bank>> expert_bank::load(const checkpoint& ck, const model_config& c,
                                                       gpu::backend& dev,
                                                       const std::vector<key>& which,
                                                       const load_progress& progress) {
  auto bank = std::make_unique<expert_bank>();
  size_t done = 0;
  for (const auto& [layer, expert] : which) {
    if (layer < 0 || layer >= c.num_layers || !c.is_moe_layer(layer) || expert < 0 ||
        expert >= c.num_experts) {
      return error(errc::invalid_argument, "expert (" + std::to_string(layer) + ", " +
                                               std::to_string(expert) + ") does not exist");
    }
    auto w = load_one(ck, c, dev, layer, expert);
    if (!w) return w.err();
    bank->insert(layer, expert, std::move(w.value()));
    if (progress) progress(++done, which.size());
  }
  return bank;
}

const ffn_weights* expert_bank::find(int layer, int expert) const {
  auto it = experts_.find({layer, expert});
  return it == experts_.end() ? nullptr : &it->second;
}

size_t expert_bank::bytes() const {
  size_t total = 0;
  for (const auto& [k, w] : experts_)
    total += w.bytes();
  return total;
}

}  // namespace brigade::model

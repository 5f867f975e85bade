#include "model/model_writer.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/dtype.hpp"
#include "model/safetensors.hpp"
#include "model/tensor_names.hpp"
#include "model/tokenizer_builder.hpp"

namespace brigade::model {
namespace {

using json = nlohmann::json;

// A seeded normal generator of our own: the same bytes on every platform and library version.
class normal_source {
 public:
  explicit normal_source(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(bits() >> 11) / 9007199254740992.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

class tensor_maker {
 public:
  tensor_maker(st_dtype type, uint64_t seed) : type_(type), rng_(seed) {}

  // mean + std * N(0, 1) in every element.
  void add(const std::string& name, std::vector<int64_t> shape, double mean, double std) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    tensor_to_write t;
    t.name = name;
    t.type = type_;
    t.shape = std::move(shape);
    t.bytes.resize(static_cast<size_t>(n) * st_dtype_size(type_));
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(mean + std * rng_.next());
      unsigned char* dst = t.bytes.data() + static_cast<size_t>(i) * st_dtype_size(type_);
      if (type_ == st_dtype::f32) {
        std::memcpy(dst, &v, 4);
      } else {
        const uint16_t h = type_ == st_dtype::bf16 ? gpu::f32_to_bf16(v) : gpu::f32_to_f16(v);
        std::memcpy(dst, &h, 2);
      }
    }
    tensors_.push_back(std::move(t));
  }
  // A projection [out, in] scaled so activations keep a unit-ish size through the network.
  void matrix(const std::string& name, int out, int in, double gain = 0.5) {
    add(name, {out, in}, 0.0, gain / std::sqrt(static_cast<double>(in)));
  }
  void norm(const std::string& name, int n) { add(name, {n}, 1.0, 0.1); }

  const std::vector<tensor_to_write>& tensors() const { return tensors_; }

 private:
  st_dtype type_;
  normal_source rng_;
  std::vector<tensor_to_write> tensors_;
};

void add_ffn(tensor_maker& t, const std::function<std::string(const std::string&)>& name,
             int hidden, int inter) {
  t.matrix(name("gate"), inter, hidden);
  t.matrix(name("up"), inter, hidden);
  t.matrix(name("down"), hidden, inter);
}

bool is_moe_family(const std::string& f) {
  return f == "qwen3_moe" || f == "mixtral" || f == "olmoe" || f == "qwen2_moe" ||
         f == "deepseek_v3";
}

void add_deepseek_config(const model_spec& s, json& c) {
  c["architectures"] = {"DeepseekV3ForCausalLM"};
  c["num_key_value_heads"] = s.heads;
  c.erase("head_dim");
  c["q_lora_rank"] = s.q_lora_rank > 0 ? json(s.q_lora_rank) : json(nullptr);
  c["kv_lora_rank"] = s.kv_lora_rank;
  c["qk_nope_head_dim"] = s.qk_nope_head_dim;
  c["qk_rope_head_dim"] = s.qk_rope_head_dim;
  c["v_head_dim"] = s.v_head_dim;
  c["n_routed_experts"] = s.experts;
  c["n_shared_experts"] = s.shared_experts;
  c["num_experts_per_tok"] = s.top_k;
  c["moe_intermediate_size"] = s.moe_inter;
  c["intermediate_size"] = s.dense_inter;
  c["n_group"] = s.groups;
  c["topk_group"] = s.top_groups;
  c["norm_topk_prob"] = s.norm_topk_prob;
  c["routed_scaling_factor"] = s.routed_scaling;
  c["scoring_func"] = "sigmoid";
  c["topk_method"] = "noaux_tc";
  c["first_k_dense_replace"] = s.first_dense;
  c["moe_layer_freq"] = 1;
  c["attention_bias"] = false;
  if (s.yarn_factor > 0) {
    c["rope_scaling"] = {{"type", "yarn"},
                         {"factor", s.yarn_factor},
                         {"original_max_position_embeddings", s.yarn_original_max_positions},
                         {"beta_fast", s.yarn_beta_fast},
                         {"beta_slow", s.yarn_beta_slow},
                         {"mscale", s.yarn_mscale},
                         {"mscale_all_dim", s.yarn_mscale_all_dim}};
  }
}

// The attention tensors of the other families, with Hugging Face's names and shapes.
void add_attention(tensor_maker& t, const model_config& c, int l) {
  const int q_rows = c.num_heads * c.head_dim;
  const int kv_rows = c.num_kv_heads * c.head_dim;
  t.matrix(names::layer(l, "self_attn.q_proj.weight"), q_rows, c.hidden_size, 1.0);
  t.matrix(names::layer(l, "self_attn.k_proj.weight"), kv_rows, c.hidden_size, 1.0);
  t.matrix(names::layer(l, "self_attn.v_proj.weight"), kv_rows, c.hidden_size, 1.0);
  t.matrix(names::layer(l, "self_attn.o_proj.weight"), c.hidden_size, q_rows);
  if (c.qkv_bias) {
    t.add(names::layer(l, "self_attn.q_proj.bias"), {q_rows}, 0.0, 0.1);
    t.add(names::layer(l, "self_attn.k_proj.bias"), {kv_rows}, 0.0, 0.1);
    t.add(names::layer(l, "self_attn.v_proj.bias"), {kv_rows}, 0.0, 0.1);
  }
  if (c.qk_norm != qk_norm_kind::none) {
    const bool whole = c.qk_norm == qk_norm_kind::whole;
    t.norm(names::layer(l, "self_attn.q_norm.weight"), whole ? q_rows : c.head_dim);
    t.norm(names::layer(l, "self_attn.k_norm.weight"), whole ? kv_rows : c.head_dim);
  }
}

// DeepSeek-V3's latent attention tensors, with Hugging Face's names and shapes.
void add_latent_attention(tensor_maker& t, const model_config& c, int l) {
  const mla_dims& m = c.mla;
  const int h = c.hidden_size;
  const int q_rows = c.num_heads * m.qk_head_dim();
  if (m.q_lora_rank > 0) {
    t.matrix(names::layer(l, "self_attn.q_a_proj.weight"), m.q_lora_rank, h, 1.0);
    t.norm(names::layer(l, "self_attn.q_a_layernorm.weight"), m.q_lora_rank);
    t.matrix(names::layer(l, "self_attn.q_b_proj.weight"), q_rows, m.q_lora_rank, 1.0);
  } else {
    t.matrix(names::layer(l, "self_attn.q_proj.weight"), q_rows, h, 1.0);
  }
  t.matrix(names::layer(l, "self_attn.kv_a_proj_with_mqa.weight"), m.cache_dim(), h, 1.0);
  t.norm(names::layer(l, "self_attn.kv_a_layernorm.weight"), m.kv_lora_rank);
  t.matrix(names::layer(l, "self_attn.kv_b_proj.weight"),
           c.num_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, 1.0);
  t.matrix(names::layer(l, "self_attn.o_proj.weight"), h, c.num_heads * m.v_head_dim);
}

json make_config(const model_spec& s, int shared_inter) {
  json c;
  c["model_type"] = s.family;
  c["vocab_size"] = s.vocab;
  c["hidden_size"] = s.hidden;
  c["num_hidden_layers"] = s.layers;
  c["num_attention_heads"] = s.heads;
  c["num_key_value_heads"] = s.kv_heads;
  c["head_dim"] = s.head_dim;
  c["max_position_embeddings"] = s.max_positions;
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = 10000.0;
  c["tie_word_embeddings"] = s.tie_embeddings;
  c["torch_dtype"] = s.dtype;
  c["hidden_act"] = "silu";
  c["rope_scaling"] = nullptr;
  c["bos_token_id"] = nullptr;
  if (s.family == "qwen3_moe" || s.family == "qwen2_moe") {
    c["architectures"] = {s.family == "qwen3_moe" ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM"};
    c["num_experts"] = s.experts;
    c["num_experts_per_tok"] = s.top_k;
    c["moe_intermediate_size"] = s.moe_inter;
    c["intermediate_size"] = s.dense_inter;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = s.mlp_only_layers;
    if (s.family == "qwen2_moe") c["shared_expert_intermediate_size"] = shared_inter;
  } else if (s.family == "mixtral") {
    c["architectures"] = {"MixtralForCausalLM"};
    c["num_local_experts"] = s.experts;
    c["num_experts_per_tok"] = s.top_k;
    c["intermediate_size"] = s.moe_inter;
    c["sliding_window"] = nullptr;
  } else if (s.family == "olmoe") {
    c["architectures"] = {"OlmoeForCausalLM"};
    c["num_experts"] = s.experts;
    c["num_experts_per_tok"] = s.top_k;
    c["intermediate_size"] = s.moe_inter;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["clip_qkv"] = nullptr;
  } else if (s.family == "deepseek_v3") {
    add_deepseek_config(s, c);
  } else {
    c["intermediate_size"] = s.dense_inter;
  }
  return c;
}

}  // namespace

status validate(const model_spec& s) {
  auto bad = [](const std::string& what) { return error(errc::invalid_argument, what); };
  const std::string f = s.family;
  if (!is_moe_family(f) && f != "qwen3" && f != "qwen2" && f != "llama") {
    return bad("--family '" + f +
               "' is not one of qwen3_moe, mixtral, olmoe, qwen2_moe, deepseek_v3, qwen3, "
               "qwen2, llama");
  }
  if (f == "deepseek_v3") {
    if (s.kv_lora_rank < 1 || s.qk_nope_head_dim < 1 || s.v_head_dim < 1 || s.q_lora_rank < 0) {
      return bad(
          "--kv-lora-rank, --qk-nope-head-dim and --v-head-dim must be at least 1, "
          "--q-lora-rank at least 0");
    }
    if (s.qk_rope_head_dim < 2 || s.qk_rope_head_dim % 2) {
      return bad("--qk-rope-head-dim must be even and at least 2");
    }
    if (s.groups < 1 || s.experts % s.groups != 0 || s.top_groups < 1 || s.top_groups > s.groups) {
      return bad("--groups must divide --experts and --top-groups be between 1 and --groups");
    }
    if (s.first_dense < 0 || s.first_dense > s.layers) {
      return bad("--first-dense must be between 0 and --layers");
    }
    if (s.yarn_factor != 0 && s.yarn_factor < 1) return bad("--yarn-factor must be 0 or >= 1");
  }
  if (s.layers < 1 || s.hidden < 1 || s.heads < 1 || s.kv_heads < 1 || s.vocab < 1) {
    return bad("--layers, --hidden, --heads, --kv-heads and --vocab must be at least 1");
  }
  if (s.heads % s.kv_heads != 0) return bad("--heads must be a multiple of --kv-heads");
  if (s.head_dim < 2 || s.head_dim % 2) return bad("--head-dim must be even and at least 2");
  if (is_moe_family(f)) {
    if (s.experts < 1) return bad("--experts must be at least 1");
    if (s.top_k < 1 || s.top_k > s.experts) return bad("--top-k must be between 1 and --experts");
    if (s.moe_inter < 1) return bad("--moe-inter must be at least 1");
  }
  for (int l : s.mlp_only_layers) {
    if (l < 0 || l >= s.layers) return bad("--mlp-only-layers names layer " + std::to_string(l));
    if (f != "qwen3_moe" && f != "qwen2_moe") {
      return bad("--mlp-only-layers applies to qwen3_moe and qwen2_moe only");
    }
  }
  if (s.dtype != "float32" && s.dtype != "bfloat16" && s.dtype != "float16") {
    return bad("--dtype '" + s.dtype + "' is not one of float32, bfloat16, float16");
  }
  if (s.max_positions < 16) return bad("--max-positions must be at least 16");
  return ok_status();
}

status write_random_model(const model_spec& s, const std::string& dir) {
  status valid = validate(s);
  if (!valid) return valid;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return error(errc::io_error, dir + ": cannot create directory: " + std::strerror(errno));
  }
  const st_dtype type = s.dtype == "float32"   ? st_dtype::f32
                        : s.dtype == "float16" ? st_dtype::f16
                                               : st_dtype::bf16;
  const int shared_inter = s.family == "qwen2_moe"
                               ? (s.shared_inter > 0 ? s.shared_inter : 2 * s.moe_inter)
                           : s.family == "deepseek_v3" ? s.shared_experts * s.moe_inter
                                                       : 0;
  const json config = make_config(s, shared_inter);
  auto parsed = parse_config(config.dump(), dir + "/config.json");
  if (!parsed) return parsed.err();
  const model_config& c = parsed.value();

  tensor_maker t(type, s.seed);
  t.add(names::embed(), {c.vocab_size, c.hidden_size}, 0.0, 1.0);
  for (int l = 0; l < c.num_layers; ++l) {
    t.norm(names::layer(l, "input_layernorm.weight"), c.hidden_size);
    t.norm(names::layer(l, "post_attention_layernorm.weight"), c.hidden_size);
    if (c.mla.enabled()) {
      add_latent_attention(t, c, l);
    } else {
      add_attention(t, c, l);
    }
    if (!c.is_moe_layer(l)) {
      add_ffn(
          t, [&](const std::string& p) { return names::dense_mlp(l, p); }, c.hidden_size,
          c.dense_intermediate);
      continue;
    }
    t.matrix(names::router(c, l), c.num_experts, c.hidden_size, 2.0);
    // DeepSeek-V3: a visible bias, so that the biased choice sometimes differs from the scores.
    if (c.sigmoid_router) t.add(names::router_bias(l), {c.num_experts}, 0.0, 0.3);
    for (int e = 0; e < c.num_experts; ++e) {
      add_ffn(
          t, [&](const std::string& p) { return names::expert(c, l, e, p); }, c.hidden_size,
          c.expert_intermediate);
    }
    if (shared_inter > 0) {
      add_ffn(
          t, [&](const std::string& p) { return names::shared_expert(c, l, p); }, c.hidden_size,
          shared_inter);
      if (c.shared_expert_gated) t.matrix(names::shared_expert_gate(l), 1, c.hidden_size, 1.0);
    }
  }
  t.norm(names::final_norm(), c.hidden_size);
  if (!c.tie_word_embeddings) t.matrix(names::lm_head(), c.vocab_size, c.hidden_size, 1.0);

  status tok = write_byte_level_tokenizer(dir, {s.vocab, s.family});
  if (!tok) return tok;
  status weights = write_safetensors(dir + "/model.safetensors", t.tensors(), {{"format", "pt"}});
  if (!weights) return weights;
  std::ofstream out(dir + "/config.json", std::ios::trunc);
  out << config.dump(2) << "\n";
  out.close();
  if (!out) return error(errc::io_error, dir + "/config.json: write failed");
  return ok_status();
}

}  // namespace brigade::model

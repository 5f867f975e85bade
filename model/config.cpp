#include "model/config.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace brigade::model {
namespace {

using json = nlohmann::json;

// Reads typed fields from one JSON object and names the first field that is missing or wrong.
class field_reader {
 public:
  field_reader(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

  bool failed() const { return failed_; }
  const error& err() const { return err_; }

  int integer(const char* name) { return integer_or(name, 0, true); }
  int integer_or(const char* name, int fallback, bool required = false) {
    const json* v = find(name, required);
    if (!v) return fallback;
    if (!v->is_number_integer()) return fail_type(name, "an integer", *v), fallback;
    const long long n = v->get<long long>();
    if (n < 0 || n > 1'000'000'000) {
      return fail(name, "is " + std::to_string(n) + ", out of range"), fallback;
    }
    return static_cast<int>(n);
  }
  double number_or(const char* name, double fallback) {
    const json* v = find(name, false);
    if (!v) return fallback;
    if (!v->is_number()) return fail_type(name, "a number", *v), fallback;
    return v->get<double>();
  }
  bool boolean_or(const char* name, bool fallback) {
    const json* v = find(name, false);
    if (!v) return fallback;
    if (!v->is_boolean()) return fail_type(name, "true or false", *v), fallback;
    return v->get<bool>();
  }
  std::vector<int> int_list_or_single(const char* name) {
    const json* v = find(name, false);
    std::vector<int> out;
    if (!v) return out;
    if (v->is_number_integer()) {
      out.push_back(v->get<int>());
    } else if (v->is_array()) {
      for (const auto& e : *v) {
        if (!e.is_number_integer()) return fail_type(name, "a list of integers", *v), out;
        out.push_back(e.get<int>());
      }
    } else {
      fail_type(name, "an integer or a list of integers", *v);
    }
    return out;
  }
  bool present(const char* name) const {
    auto it = obj_.find(name);
    return it != obj_.end() && !it->is_null();
  }
  void fail(const char* name, const std::string& what) {
    if (failed_) return;
    failed_ = true;
    err_ = error(errc::bad_format, source_ + ": field '" + name + "' " + what);
  }

 private:
  const json* find(const char* name, bool required) {
    auto it = obj_.find(name);
    if (it == obj_.end() || it->is_null()) {
      if (required) fail(name, "is missing");
      return nullptr;
    }
    return &*it;
  }
  void fail_type(const char* name, const char* expected, const json& got) {
    fail(name, std::string("must be ") + expected + ", got " + got.type_name());
  }

  const json& obj_;
  std::string source_;
  bool failed_ = false;
  error err_;
};

struct family_entry {
  const char* model_type;
  family fam;
};

constexpr family_entry families[] = {
    {"qwen3_moe", family::qwen3_moe},
    {"mixtral", family::mixtral},
    {"olmoe", family::olmoe},
    {"qwen2_moe", family::qwen2_moe},
    {"qwen3", family::qwen3},
    {"qwen2", family::qwen2},
    {"llama", family::llama},
    {"mistral", family::llama},
    {"deepseek_v3", family::deepseek_v3},
};

// DeepSeek-V3: latent attention, sigmoid group-limited routing, shared experts, dense first
// layers.
void read_deepseek_fields(field_reader& f, model_config& c) {
  c.mla.q_lora_rank = f.integer_or("q_lora_rank", 0);
  c.mla.kv_lora_rank = f.integer("kv_lora_rank");
  c.mla.qk_nope_head_dim = f.integer("qk_nope_head_dim");
  c.mla.qk_rope_head_dim = f.integer("qk_rope_head_dim");
  c.mla.v_head_dim = f.integer("v_head_dim");
  // The cache holds one row per token, shared by every head.
  c.num_kv_heads = 1;
  c.head_dim = c.mla.cache_dim();
  c.num_experts = f.integer("n_routed_experts");
  c.top_k = f.integer("num_experts_per_tok");
  c.expert_intermediate = f.integer("moe_intermediate_size");
  c.dense_intermediate = f.integer_or("intermediate_size", 0);
  c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
  c.routed_scaling = static_cast<float>(f.number_or("routed_scaling_factor", 1.0));
  c.expert_groups = f.integer_or("n_group", 1);
  c.topk_groups = f.integer_or("topk_group", 1);
  c.shared_expert_intermediate = f.integer_or("n_shared_experts", 0) * c.expert_intermediate;
  c.shared_expert_gated = false;
  c.sigmoid_router = true;
  const int dense_first = f.integer_or("first_k_dense_replace", 0);
  for (int l = 0; l < dense_first; ++l)
    c.mlp_only_layers.push_back(l);
  if (f.integer_or("moe_layer_freq", 1) != 1) {
    f.fail("moe_layer_freq",
           "must be 1: brigade places experts in every layer after "
           "first_k_dense_replace");
  }
}

// Family-specific fields: where the expert sizes live and which attention options apply.
void read_family_fields(field_reader& f, model_config& c) {
  switch (c.fam) {
    case family::qwen3_moe:
    case family::qwen2_moe:
      c.num_experts = f.integer("num_experts");
      c.top_k = f.integer("num_experts_per_tok");
      c.expert_intermediate = f.integer("moe_intermediate_size");
      c.dense_intermediate = f.integer_or("intermediate_size", 0);
      c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
      c.decoder_sparse_step = f.integer_or("decoder_sparse_step", 1);
      c.mlp_only_layers = f.int_list_or_single("mlp_only_layers");
      if (c.fam == family::qwen3_moe) {
        c.qk_norm = qk_norm_kind::per_head;
        c.qkv_bias = f.boolean_or("attention_bias", false);
      } else {
        c.qkv_bias = true;
        c.shared_expert_intermediate = f.integer_or("shared_expert_intermediate_size", 0);
      }
      break;
    case family::mixtral:
      c.num_experts = f.integer("num_local_experts");
      c.top_k = f.integer("num_experts_per_tok");
      c.expert_intermediate = f.integer("intermediate_size");
      c.norm_topk_prob = true;  // Mixtral's softmax over the selected logits.
      break;
    case family::olmoe:
      c.num_experts = f.integer("num_experts");
      c.top_k = f.integer("num_experts_per_tok");
      c.expert_intermediate = f.integer("intermediate_size");
      c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
      c.qk_norm = qk_norm_kind::whole;
      c.qkv_bias = f.boolean_or("attention_bias", false);
      break;
    case family::qwen3:
      c.dense_intermediate = f.integer("intermediate_size");
      c.qk_norm = qk_norm_kind::per_head;
      c.qkv_bias = f.boolean_or("attention_bias", false);
      break;
    case family::qwen2:
      c.dense_intermediate = f.integer("intermediate_size");
      c.qkv_bias = true;
      break;
    case family::llama:
      c.dense_intermediate = f.integer("intermediate_size");
      c.qkv_bias = f.boolean_or("attention_bias", false);
      break;
    case family::deepseek_v3:
      read_deepseek_fields(f, c);
      break;
  }
}

// DeepSeek-V3's string-valued choices and its YaRN rope scaling: what brigade cannot honour is
// refused, naming the field.
status read_deepseek_choices(const json& j, model_config& c, const std::string& source) {
  auto bad = [&](const std::string& field, const std::string& what) {
    return error(errc::unsupported, source + ": field '" + field + "' " + what);
  };
  auto text = [&](const char* name, const char* fallback) {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
  };
  if (text("scoring_func", "sigmoid") != "sigmoid") {
    return bad("scoring_func", "is '" + text("scoring_func", "") +
                                   "'; brigade runs DeepSeek-V3's "
                                   "sigmoid router only");
  }
  if (text("topk_method", "noaux_tc") != "noaux_tc") {
    return bad("topk_method", "is '" + text("topk_method", "") +
                                  "'; brigade runs 'noaux_tc' "
                                  "(bias-corrected, group-limited) only");
  }
  auto rs = j.find("rope_scaling");
  if (rs == j.end() || rs->is_null()) return ok_status();
  if (!rs->is_object()) return bad("rope_scaling", "must be an object or null");
  const std::string type = rs->value("type", rs->value("rope_type", std::string()));
  if (type != "yarn") {
    return bad("rope_scaling.type", "is '" + type + "'; brigade implements 'yarn' only");
  }
  auto number = [&](const char* name, double fallback, double& out) -> status {
    auto it = rs->find(name);
    if (it == rs->end() || it->is_null()) {
      out = fallback;
      return ok_status();
    }
    if (!it->is_number()) return bad(std::string("rope_scaling.") + name, "must be a number");
    out = it->get<double>();
    return ok_status();
  };
  yarn_scaling& y = c.yarn;
  y.enabled = true;
  double original = 4096;
  for (status s :
       {number("factor", 1.0, y.factor), number("original_max_position_embeddings", 4096, original),
        number("beta_fast", 32, y.beta_fast), number("beta_slow", 1, y.beta_slow),
        number("mscale", 1, y.mscale), number("mscale_all_dim", 0, y.mscale_all_dim)}) {
    if (!s) return s;
  }
  y.original_max_positions = static_cast<int>(original);
  if (y.factor < 1.0 || y.original_max_positions < 1) {
    return bad("rope_scaling", "needs factor >= 1 and original_max_position_embeddings >= 1");
  }
  for (auto it = rs->begin(); it != rs->end(); ++it) {
    static const char* known[] = {
        "type",      "rope_type", "factor", "original_max_position_embeddings",
        "beta_fast", "beta_slow", "mscale", "mscale_all_dim"};
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char* k) { return it.key() == k; }) == std::end(known)) {
      return bad("rope_scaling." + it.key(), "is not a YaRN field brigade knows");
    }
  }
  return ok_status();
}

// Cross-field checks that a typed parse cannot catch.
status validate(const model_config& c, const std::string& source) {
  auto bad = [&](const std::string& what) { return error(errc::bad_format, source + ": " + what); };
  if (c.vocab_size < 1) return bad("vocab_size must be at least 1");
  if (c.hidden_size < 1 || c.num_layers < 1 || c.num_heads < 1 || c.num_kv_heads < 1) {
    return bad(
        "hidden_size, num_hidden_layers, num_attention_heads and num_key_value_heads "
        "must all be at least 1");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return bad("num_attention_heads (" + std::to_string(c.num_heads) +
               ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) +
               ")");
  }
  if (c.fam == family::deepseek_v3) {
    const mla_dims& m = c.mla;
    if (m.kv_lora_rank < 1 || m.qk_nope_head_dim < 1 || m.v_head_dim < 1 || m.q_lora_rank < 0) {
      return bad(
          "kv_lora_rank, qk_nope_head_dim and v_head_dim must be at least 1, and "
          "q_lora_rank at least 0 (null for a plain q_proj)");
    }
    if (m.qk_rope_head_dim < 2 || m.qk_rope_head_dim % 2 != 0) {
      return bad("qk_rope_head_dim must be even and at least 2 (got " +
                 std::to_string(m.qk_rope_head_dim) + ")");
    }
  } else if (c.head_dim < 2 || c.head_dim % 2 != 0) {
    return bad("head_dim must be even and at least 2 (got " + std::to_string(c.head_dim) + ")");
  }
  if (c.expert_groups < 1 || (c.is_moe() && c.num_experts % c.expert_groups != 0)) {
    return bad("n_group (" + std::to_string(c.expert_groups) +
               ") must be at least 1 and divide the number of experts (" +
               std::to_string(c.num_experts) + ")");
  }
  if (c.topk_groups < 1 || c.topk_groups > c.expert_groups) {
    return bad("topk_group (" + std::to_string(c.topk_groups) +
               ") must be between 1 and n_group (" + std::to_string(c.expert_groups) + ")");
  }
  if (c.is_moe() && c.top_k > c.topk_groups * (c.num_experts / c.expert_groups)) {
    return bad("num_experts_per_tok (" + std::to_string(c.top_k) +
               ") is more than the experts of topk_group groups hold");
  }
  if (c.is_moe()) {
    if (c.top_k < 1 || c.top_k > c.num_experts) {
      return bad("num_experts_per_tok (" + std::to_string(c.top_k) + ") must be between 1 and " +
                 "the number of experts (" + std::to_string(c.num_experts) + ")");
    }
    if (c.expert_intermediate < 1) return bad("the expert intermediate size must be at least 1");
    if (c.decoder_sparse_step < 1) return bad("decoder_sparse_step must be at least 1");
  }
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_moe_layer(l) && c.dense_intermediate < 1) {
      return bad("layer " + std::to_string(l) + " has a dense MLP but intermediate_size is unset");
    }
  }
  if (c.max_positions < 1) return bad("max_position_embeddings must be at least 1");
  return ok_status();
}

}  // namespace

const char* family_name(family f) {
  for (const auto& e : families) {
    if (e.fam == f) return e.model_type;
  }
  return "?";
}

std::vector<int> model_config::moe_layers() const {
  std::vector<int> out;
  for (int l = 0; l < num_layers; ++l) {
    if (is_moe_layer(l)) out.push_back(l);
  }
  return out;
}

bool model_config::is_moe_layer(int layer) const {
  if (!is_moe()) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) {
    return false;
  }
  return (layer + 1) % decoder_sparse_step == 0;
}

double model_config::total_params() const {
  const double h = hidden_size;
  const double attn = h * head_dim * (num_heads * 2.0 + num_kv_heads * 2.0);
  double total = vocab_size * h * (tie_word_embeddings ? 1.0 : 2.0);
  for (int l = 0; l < num_layers; ++l) {
    total += attn;
    if (is_moe_layer(l)) {
      total += num_experts * 3.0 * h * expert_intermediate + h * num_experts +
               3.0 * h * shared_expert_intermediate;
    } else {
      total += 3.0 * h * dense_intermediate;
    }
  }
  return total;
}

double model_config::active_params() const {
  const double h = hidden_size;
  const double attn = h * head_dim * (num_heads * 2.0 + num_kv_heads * 2.0);
  double total = vocab_size * h;  // lm_head; the embedding is a lookup
  for (int l = 0; l < num_layers; ++l) {
    total += attn;
    if (is_moe_layer(l)) {
      total += top_k * 3.0 * h * expert_intermediate + h * num_experts +
               3.0 * h * shared_expert_intermediate;
    } else {
      total += 3.0 * h * dense_intermediate;
    }
  }
  return total;
}

result<model_config> parse_config(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error(errc::bad_format, source + ": not valid JSON");
  if (!j.is_object()) return error(errc::bad_format, source + ": not a JSON object");
  model_config c;
  auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string()) {
    return error(errc::bad_format, source + ": field 'model_type' is missing or not a string");
  }
  c.model_type = type_it->get<std::string>();
  const family_entry* fam = nullptr;
  for (const auto& e : families) {
    if (c.model_type == e.model_type) fam = &e;
  }
  if (!fam) {
    return error(errc::unsupported,
                 source + ": model_type '" + c.model_type +
                     "' is not supported (supported: qwen3_moe, mixtral, olmoe, qwen2_moe, qwen3, "
                     "qwen2, llama, mistral)");
  }
  c.fam = fam->fam;
  field_reader f(j, source);
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer_or("num_key_value_heads", c.num_heads);
  c.head_dim = f.integer_or("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_positions = f.integer_or("max_position_embeddings", 4096);
  c.rms_norm_eps = static_cast<float>(f.number_or("rms_norm_eps", 1e-6));
  c.rope_theta = f.number_or("rope_theta", 10000.0);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  read_family_fields(f, c);
  c.eos_token_ids = f.int_list_or_single("eos_token_id");
  const std::vector<int> bos = f.int_list_or_single("bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos.front();
  const bool qwen = c.fam == family::qwen2 || c.fam == family::qwen2_moe ||
                    c.fam == family::qwen3 || c.fam == family::qwen3_moe;
  if (qwen) {
    // Qwen configs carry a sliding_window value that applies only with use_sliding_window.
    if (f.boolean_or("use_sliding_window", false)) {
      f.fail("use_sliding_window", "is true; brigade does not implement Qwen's per-layer window");
    }
  } else {
    c.sliding_window = f.integer_or("sliding_window", 0);
  }
  if (c.fam == family::olmoe) c.clip_qkv = static_cast<float>(f.number_or("clip_qkv", 0.0));
  if (c.fam == family::deepseek_v3) {
    status s = read_deepseek_choices(j, c, source);
    if (!s) return s.err();
  } else if (f.present("rope_scaling")) {
    f.fail("rope_scaling", "is set; brigade supports only unscaled RoPE (rope_scaling: null)");
  }
  if (f.failed()) return f.err();
  status valid = validate(c, source);
  if (!valid) return valid.err();
  return c;
}

result<model_config> load_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) {
    return error(errc::not_found,
                 path + ": cannot open (is " + dir + " a Hugging Face checkpoint directory?)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path);
}

}  // namespace brigade::model

#include "bench/peers/llamacpp/qwen3moe_gguf.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/peers/llamacpp/gguf_writer.hpp"
#include "gpu/dtype.hpp"
#include "model/safetensors.hpp"

namespace brigade::bench::llamacpp {
namespace {

using json = nlohmann::json;

// llama.cpp's token types (llama_token_type).
constexpr int32_t token_normal = 1, token_control = 3, token_user_defined = 4, token_unused = 5;
// llama_ftype of a file whose matrices are bf16 (general.file_type).
constexpr uint32_t file_type_bf16 = 32;

result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(errc::not_found, path + ": cannot open it");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return error(errc::bad_format, path + ": not valid JSON");
  return j;
}

// The source element at `i` of a tensor, widened to float32.
float element(const model::tensor_view& t, size_t i) {
  if (t.type == model::st_dtype::f32) {
    float f;
    std::memcpy(&f, t.data + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.data + i * 2, 2);
  return t.type == model::st_dtype::bf16 ? gpu::bf16_to_f32(h) : gpu::f16_to_f32(h);
}

// Appends a tensor's elements as bf16: the bits themselves when the source is bf16.
void append_bf16(const model::tensor_view& t, std::vector<unsigned char>& out) {
  if (t.type == model::st_dtype::bf16) {
    out.insert(out.end(), t.data, t.data + t.bytes);
    return;
  }
  const size_t n = static_cast<size_t>(t.elements());
  const size_t at = out.size();
  out.resize(at + 2 * n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t b = gpu::f32_to_bf16(element(t, i));
    std::memcpy(&out[at + 2 * i], &b, 2);
  }
}

std::vector<unsigned char> as_f32(const model::tensor_view& t) {
  const size_t n = static_cast<size_t>(t.elements());
  std::vector<unsigned char> out(4 * n);
  for (size_t i = 0; i < n; ++i) {
    const float f = element(t, i);
    std::memcpy(&out[4 * i], &f, 4);
  }
  return out;
}

// GGUF lists dimensions innermost first: the reverse of the safetensors (row-major) shape.
std::vector<uint64_t> ggml_dims(const std::vector<int64_t>& shape) {
  return std::vector<uint64_t>(shape.rbegin(), shape.rend());
}

// Reads tensors of one checkpoint by their Hugging Face names and adds them under GGUF names.
class tensor_mapper {
 public:
  tensor_mapper(const model::safetensors_file& file, gguf_writer& out) : file_(file), out_(out) {}

  result<const model::tensor_view*> find(const std::string& hf_name) const {
    const model::tensor_view* t = file_.find(hf_name);
    if (!t) return error(errc::not_found, file_.path() + ": no tensor " + hf_name);
    const auto ty = t->type;
    if (ty != model::st_dtype::f32 && ty != model::st_dtype::bf16 && ty != model::st_dtype::f16) {
      return error(
          errc::unsupported,
          hf_name + ": element type " + std::string(model::st_dtype_name(ty)) + " is not handled");
    }
    return t;
  }

  status f32(const std::string& gguf_name, const std::string& hf_name) {
    auto t = find(hf_name);
    if (!t) return t.err();
    return out_.add_tensor(gguf_name, ggml_type::f32, ggml_dims(t.value()->shape),
                           as_f32(*t.value()));
  }

  status bf16(const std::string& gguf_name, const std::string& hf_name) {
    auto t = find(hf_name);
    if (!t) return t.err();
    std::vector<unsigned char> bytes;
    append_bf16(*t.value(), bytes);
    return out_.add_tensor(gguf_name, ggml_type::bf16, ggml_dims(t.value()->shape),
                           std::move(bytes));
  }

  /// One 3-D tensor {in, out, experts} from the experts' [out, in] matrices, expert 0 first.
  status experts(const std::string& gguf_name, const std::string& prefix, const char* proj,
                 int count) {
    std::vector<unsigned char> bytes;
    std::vector<int64_t> shape;
    for (int e = 0; e < count; ++e) {
      auto t = find(prefix + std::to_string(e) + "." + proj + ".weight");
      if (!t) return t.err();
      if (e > 0 && t.value()->shape != shape) {
        return error(errc::bad_format, prefix + std::to_string(e) + ": shape differs");
      }
      shape = t.value()->shape;
      append_bf16(*t.value(), bytes);
    }
    std::vector<uint64_t> dims = ggml_dims(shape);
    dims.push_back(static_cast<uint64_t>(count));
    return out_.add_tensor(gguf_name, ggml_type::bf16, std::move(dims), std::move(bytes));
  }

 private:
  const model::safetensors_file& file_;
  gguf_writer& out_;
};

status check_supported(const json& cfg) {
  if (cfg.value("model_type", "") != "qwen3_moe") {
    return error(errc::unsupported, "model_type " + cfg.value("model_type", std::string("?")) +
                                        ": only qwen3_moe converts to llama.cpp's qwen3moe");
  }
  const bool dense_layers = cfg.contains("mlp_only_layers") && !cfg["mlp_only_layers"].empty();
  if (dense_layers || cfg.value("decoder_sparse_step", 1) != 1) {
    return error(errc::unsupported, "dense MLP layers: llama.cpp's qwen3moe has none");
  }
  if (!cfg.value("norm_topk_prob", true)) {
    return error(errc::unsupported,
                 "norm_topk_prob false: llama.cpp's qwen3moe always renormalises");
  }
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null()) {
    return error(errc::unsupported, "rope_scaling is not converted");
  }
  return ok_status();
}

void add_hyperparameters(const json& cfg, const std::string& name, gguf_writer& out) {
  const std::string a = "qwen3moe.";
  const int hidden = cfg.at("hidden_size").get<int>();
  const int heads = cfg.at("num_attention_heads").get<int>();
  const int head_dim = cfg.value("head_dim", hidden / heads);
  out.add_string("general.architecture", "qwen3moe");
  out.add_string("general.name", name);
  out.add_u32("general.file_type", file_type_bf16);
  out.add_u32(a + "block_count", cfg.at("num_hidden_layers").get<uint32_t>());
  out.add_u32(a + "context_length", cfg.value("max_position_embeddings", 4096u));
  out.add_u32(a + "embedding_length", static_cast<uint32_t>(hidden));
  out.add_u32(a + "feed_forward_length", cfg.value("intermediate_size", 0u));
  out.add_u32(a + "attention.head_count", static_cast<uint32_t>(heads));
  out.add_u32(a + "attention.head_count_kv", cfg.at("num_key_value_heads").get<uint32_t>());
  out.add_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
  out.add_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
  out.add_f32(a + "attention.layer_norm_rms_epsilon", cfg.value("rms_norm_eps", 1e-6f));
  out.add_f32(a + "rope.freq_base", cfg.value("rope_theta", 10000.0f));
  out.add_u32(a + "expert_count", cfg.at("num_experts").get<uint32_t>());
  out.add_u32(a + "expert_used_count", cfg.at("num_experts_per_tok").get<uint32_t>());
  out.add_u32(a + "expert_feed_forward_length", cfg.at("moe_intermediate_size").get<uint32_t>());
}

// A special token of tokenizer_config.json: a string, or an object with "content".
std::string special_token(const json& tok_cfg, const char* key) {
  if (!tok_cfg.contains(key)) return {};
  const json& v = tok_cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return {};
}

status add_vocabulary(const json& tok, const json& tok_cfg, int vocab, gguf_writer& out) {
  std::vector<std::string> text(static_cast<size_t>(vocab));
  std::vector<int32_t> type(static_cast<size_t>(vocab), token_unused);
  const json& model = tok.at("model");
  if (model.value("type", "") != "BPE") return error(errc::unsupported, "tokenizer is not BPE");
  for (const auto& [piece, id_json] : model.at("vocab").items()) {
    const int id = id_json.get<int>();
    if (id < 0 || id >= vocab) continue;
    text[static_cast<size_t>(id)] = piece;
    type[static_cast<size_t>(id)] = token_normal;
  }
  for (const json& added : tok.value("added_tokens", json::array())) {
    const int id = added.at("id").get<int>();
    if (id < 0 || id >= vocab) continue;
    text[static_cast<size_t>(id)] = added.at("content").get<std::string>();
    type[static_cast<size_t>(id)] =
        added.value("special", false) ? token_control : token_user_defined;
  }
  // Ids the tokenizer never produces still need distinct texts: llama.cpp maps text to id.
  for (size_t id = 0; id < text.size(); ++id) {
    if (type[id] == token_unused) text[id] = "<unused" + std::to_string(id) + ">";
  }
  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  }
  out.add_string("tokenizer.ggml.model", "gpt2");
  out.add_string("tokenizer.ggml.pre", "qwen2");
  out.add_strings("tokenizer.ggml.tokens", text);
  out.add_i32s("tokenizer.ggml.token_type", type);
  out.add_strings("tokenizer.ggml.merges", merges);
  auto id_of = [&](const std::string& s) -> int {
    for (size_t id = 0; id < text.size(); ++id) {
      if (!s.empty() && text[id] == s && type[id] != token_unused) return static_cast<int>(id);
    }
    return -1;
  };
  const int eos = id_of(special_token(tok_cfg, "eos_token"));
  const int pad = id_of(special_token(tok_cfg, "pad_token"));
  const int bos = id_of(special_token(tok_cfg, "bos_token"));
  if (eos >= 0) out.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (pad >= 0) out.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
  if (bos >= 0) out.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  out.add_bool("tokenizer.ggml.add_bos_token", tok_cfg.value("add_bos_token", false));
  return ok_status();
}

status add_weights(const json& cfg, tensor_mapper& map) {
  const int layers = cfg.at("num_hidden_layers").get<int>();
  const int experts = cfg.at("num_experts").get<int>();
  status s = map.bf16("token_embd.weight", "model.embed_tokens.weight");
  for (int l = 0; l < layers && s; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string gg = "blk." + std::to_string(l) + ".";
    const std::pair<const char*, const char*> norms[] = {
        {"attn_norm", "input_layernorm"},    {"attn_q_norm", "self_attn.q_norm"},
        {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
        {"ffn_gate_inp", "mlp.gate"},  // the router: kept f32, as llama.cpp's converter does
    };
    for (const auto& [to, from] : norms) {
      if (s) s = map.f32(gg + to + ".weight", hf + from + ".weight");
    }
    const std::pair<const char*, const char*> matrices[] = {
        {"attn_q", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},
        {"attn_output", "self_attn.o_proj"},
    };
    for (const auto& [to, from] : matrices) {
      if (s) s = map.bf16(gg + to + ".weight", hf + from + ".weight");
    }
    const std::pair<const char*, const char*> stacks[] = {
        {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}};
    for (const auto& [to, from] : stacks) {
      if (s) s = map.experts(gg + to + ".weight", hf + "mlp.experts.", from, experts);
    }
  }
  if (s) s = map.f32("output_norm.weight", "model.norm.weight");
  // Tied embeddings: llama.cpp falls back to token_embd when output.weight is absent.
  if (s && !cfg.value("tie_word_embeddings", false))
    s = map.bf16("output.weight", "lm_head.weight");
  return s;
}

}  // namespace

result<gguf_summary> write_qwen3moe_gguf(const std::string& model_dir,
                                         const std::string& out_path) {
  auto cfg = read_json(model_dir + "/config.json");
  if (!cfg) return cfg.err();
  status s = check_supported(cfg.value());
  if (!s) return s.err();
  auto tok = read_json(model_dir + "/tokenizer.json");
  if (!tok) return tok.err();
  json tok_cfg = json::object();
  if (std::filesystem::exists(model_dir + "/tokenizer_config.json")) {
    auto read = read_json(model_dir + "/tokenizer_config.json");
    if (!read) return read.err();
    tok_cfg = std::move(read.value());
  }
  auto file = model::safetensors_file::open(model_dir + "/model.safetensors");
  if (!file) return file.err();

  gguf_writer out;
  try {
    const std::string name = std::filesystem::path(model_dir).filename().string();
    add_hyperparameters(cfg.value(), name, out);
    s = add_vocabulary(tok.value(), tok_cfg, cfg->at("vocab_size").get<int>(), out);
    tensor_mapper map(*file.value(), out);
    if (s) s = add_weights(cfg.value(), map);
  } catch (const json::exception& e) {
    return error(errc::bad_format, model_dir + ": " + e.what());
  }
  if (s) s = out.write(out_path);
  if (!s) return s.err();
  return gguf_summary{out.tensor_count(), std::filesystem::file_size(out_path)};
}

}  // namespace brigade::bench::llamacpp

#include "model/tensor_names.hpp"

namespace brigade::model::names {

std::string embed() {
  return "model.embed_tokens.weight";
}
std::string final_norm() {
  return "model.norm.weight";
}
std::string lm_head() {
  return "lm_head.weight";
}

std::string layer(int l, const std::string& suffix) {
  return "model.layers." + std::to_string(l) + "." + suffix;
}

std::string router(const model_config& c, int l) {
  return layer(l, c.fam == family::mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
}

std::string expert(const model_config& c, int l, int e, const std::string& part) {
  if (c.fam == family::mixtral) {
    // Mixtral's w1 is the gate projection, w3 the up projection and w2 the down projection.
    const char* w = part == "gate" ? "w1" : part == "up" ? "w3" : "w2";
    return layer(l, "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight");
  }
  return layer(l, "mlp.experts." + std::to_string(e) + "." + part + "_proj.weight");
}

std::string shared_expert(const model_config& c, int l, const std::string& part) {
  // DeepSeek-V3's n_shared_experts sit fused in one MLP named in the plural.
  const char* block = c.fam == family::deepseek_v3 ? "mlp.shared_experts." : "mlp.shared_expert.";
  return layer(l, block + part + "_proj.weight");
}

std::string router_bias(int l) {
  return layer(l, "mlp.gate.e_score_correction_bias");
}

std::string shared_expert_gate(int l) {
  return layer(l, "mlp.shared_expert_gate.weight");
}

std::string dense_mlp(int l, const std::string& part) {
  return layer(l, "mlp." + part + "_proj.weight");
}

}  // namespace brigade::model::names

// The Hugging Face tensor names of each family, in one place.
#pragma once

#include <string>

#include "model/config.hpp"

namespace brigade::model::names {

std::string embed();
std::string final_norm();
std::string lm_head();
std::string layer(int l, const std::string& suffix);
/// The router (gate) of a MoE layer.
std::string router(const model_config& c, int l);
/// part is "gate", "up" or "down".
std::string expert(const model_config& c, int l, int e, const std::string& part);
std::string shared_expert(const model_config& c, int l, const std::string& part);
/// DeepSeek-V3's router bias, e_score_correction_bias.
std::string router_bias(int l);
std::string shared_expert_gate(int l);
std::string dense_mlp(int l, const std::string& part);

}  // namespace brigade::model::names

// Rotary position frequencies, plain or YaRN-scaled (DeepSeek-V3), and the attention scale that
// goes with them. Written from the YaRN paper (arXiv 2309.00071) and the Hugging Face config
// fields (rope_scaling: factor, original_max_position_embeddings, beta_fast, beta_slow, mscale,
// mscale_all_dim).
#pragma once

#include <vector>

#include "model/config.hpp"

namespace brigade::model {

/// The inverse frequency of each of the dims / 2 rotary pairs. Plain: theta^(-2i/dims). YaRN:
/// pairs that turn fewer than beta_slow times over the original context are interpolated
/// (divided by factor), those that turn more than beta_fast times are kept, and a linear ramp
/// blends the ones between.
std::vector<double> rope_inverse_frequencies(const model_config& c, int dims);

/// YaRN's temperature 0.1 * m * ln(factor) + 1 (1 when factor <= 1).
double yarn_mscale(double factor, double m);

/// What cos and sin are multiplied by: yarn_mscale(factor, mscale) / yarn_mscale(factor,
/// mscale_all_dim) with YaRN, 1 otherwise.
double rope_magnitude(const model_config& c);

/// The softmax scale of attention: 1/sqrt(query-key dims), times yarn_mscale(factor,
/// mscale_all_dim)^2 for DeepSeek-V3 with YaRN.
float attention_scale(const model_config& c);

}  // namespace brigade::model

#include "model/rope_scaling.hpp"

#include <algorithm>
#include <cmath>

namespace brigade::model {

namespace {

constexpr double pi = 3.14159265358979323846;

// The rotary dimension whose pair turns `turns` times over `context` positions.
double dimension_turning(double turns, int dims, double base, int context) {
  return dims * std::log(context / (turns * 2 * pi)) / (2 * std::log(base));
}

}  // namespace

std::vector<double> rope_inverse_frequencies(const model_config& c, int dims) {
  const int half = dims / 2;
  std::vector<double> out(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    out[static_cast<size_t>(i)] = std::pow(c.rope_theta, -2.0 * i / dims);
  const yarn_scaling& y = c.yarn;
  if (!y.enabled) return out;
  double low =
      std::floor(dimension_turning(y.beta_fast, dims, c.rope_theta, y.original_max_positions));
  double high =
      std::ceil(dimension_turning(y.beta_slow, dims, c.rope_theta, y.original_max_positions));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dims - 1));
  if (low == high) high += 0.001;  // a ramp of zero width would divide by zero
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // 1: the original frequency, 0: the interpolated one
    const double original = out[static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = original / y.factor * (1.0 - keep) + original * keep;
  }
  return out;
}

double yarn_mscale(double factor, double m) {
  return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

double rope_magnitude(const model_config& c) {
  if (!c.yarn.enabled) return 1.0;
  return yarn_mscale(c.yarn.factor, c.yarn.mscale) /
         yarn_mscale(c.yarn.factor, c.yarn.mscale_all_dim);
}

float attention_scale(const model_config& c) {
  if (!c.mla.enabled()) return 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  double scale = 1.0 / std::sqrt(static_cast<double>(c.mla.qk_head_dim()));
  if (c.yarn.enabled && c.yarn.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(c.yarn.factor, c.yarn.mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

}  // namespace brigade::model

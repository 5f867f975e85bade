#include "bench/sample_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace brigade::bench {
namespace {

// Nearest-rank quantile that reorders `values` in place: linear time, for the bootstrap's many
// resamples.
double quantile_in_place(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  const auto at = static_cast<size_t>(std::llround(q * static_cast<double>(values.size() - 1)));
  auto nth = values.begin() + static_cast<std::ptrdiff_t>(std::min(at, values.size() - 1));
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

}  // namespace

double quantile(std::vector<double> values, double q) {
  return quantile_in_place(values, std::clamp(q, 0.0, 1.0));
}

ratio_interval bootstrap_quantile_ratio(const std::vector<sample_group>& groups, double q,
                                        int resamples, uint64_t seed) {
  ratio_interval out;
  out.groups = static_cast<int>(groups.size());
  if (groups.empty() || resamples < 1) return out;
  q = std::clamp(q, 0.0, 1.0);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, groups.size() - 1);
  std::vector<double> ratios, a, b;
  ratios.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    a.clear();
    b.clear();
    for (size_t g = 0; g < groups.size(); ++g) {
      const sample_group& drawn = groups[pick(rng)];
      a.insert(a.end(), drawn.a.begin(), drawn.a.end());
      b.insert(b.end(), drawn.b.begin(), drawn.b.end());
    }
    // A resample without one of the kinds has no ratio: the data cannot bound it.
    if (a.empty() || b.empty()) return ratio_interval{0, 0, out.groups};
    const double below = quantile_in_place(b, q);
    if (below <= 0) return ratio_interval{0, 0, out.groups};
    ratios.push_back(quantile_in_place(a, q) / below);
  }
  out.low = quantile_in_place(ratios, 0.025);
  out.high = quantile_in_place(ratios, 0.975);
  return out;
}

}  // namespace brigade::bench

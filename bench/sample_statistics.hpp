// Quantiles of measured samples, and how far a ratio of quantiles can be trusted. Every bench
// reads its percentiles here, so that "p99" means the same rank everywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::bench {

/// The q-quantile (0 <= q <= 1) of `values` by nearest rank: once sorted, the value at index
/// round(q * (n - 1)). 0 for no values.
double quantile(std::vector<double> values, double q);

/// Samples measured together, kept together when resampled: `a` and `b` are two kinds of sample
/// taken in one stretch of a run (for example the steps that overlapped one migration, and the
/// steps between it and the next).
struct sample_group {
  std::vector<double> a;
  std::vector<double> b;
};

struct ratio_interval {
  double low = 0;
  double high = 0;
  int groups = 0;  ///< Groups resampled: with few, even a wide interval is a rough guess.
};

/// A 95% interval for quantile(every a, q) / quantile(every b, q), by a block bootstrap: whole
/// groups are drawn with replacement `resamples` times and the ratio taken each time. Drawing
/// groups, not single samples, keeps samples that are slow together (a noisy second of the host)
/// together, which would otherwise make the interval narrower than the data allow. A fixed seed
/// gives the same interval for the same samples. {0, 0} when a resample can hold no a or no b.
ratio_interval bootstrap_quantile_ratio(const std::vector<sample_group>& groups, double q,
                                        int resamples = 2000, uint64_t seed = 1);

}  // namespace brigade::bench

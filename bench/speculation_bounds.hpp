// The best speedups speculation allows from measured costs and acceptance (`brigade bench
// speculation`'s `bound` and `bound, drafts counted` columns).
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::bench {

/// What the bounds charge, in seconds at batch 1.
struct bound_costs {
  std::vector<double> verify;  ///< A verify step of 0..max_draft drafts (0: a plain step).
  double draft = 0;            ///< A draft forward after the first of a step.
  double first_draft = 0;      ///< A step's first draft forward, right after its verify step.

  /// `forwards` draft forwards in `steps` steps, the first of each step cold, in plain steps.
  double draft_units(int64_t forwards, int64_t steps) const;
};

/// The best speedup over plain decoding that a fixed verify length allows, given `a` (per draft
/// position, the share kept of the drafts reached there) and `cost`: max over lengths L of
/// (1 + a0 + a0 a1 + ... + a0...a(L-1)) tokens over a step's cost in plain steps. With
/// `count_drafts`, a length L also pays L draft forwards (the first cold), else drafting is
/// free. At least 1 (length 0, plain decoding).
double fixed_length_bound(const std::vector<double>& a, const bound_costs& cost, bool count_drafts);

}  // namespace brigade::bench

#include "bench/speculation_bounds.hpp"

#include <algorithm>

namespace brigade::bench {

double bound_costs::draft_units(int64_t forwards, int64_t steps) const {
  const int64_t cold = std::min(forwards, steps);
  return (static_cast<double>(cold) * first_draft + static_cast<double>(forwards - cold) * draft) /
         verify[0];
}

double fixed_length_bound(const std::vector<double>& a, const bound_costs& cost,
                          bool count_drafts) {
  double best = 1.0, tokens = 1.0, reach = 1.0;
  for (size_t l = 1; l <= a.size() && l < cost.verify.size(); ++l) {
    reach *= a[l - 1];
    tokens += reach;
    const double drafts = count_drafts ? cost.draft_units(static_cast<int64_t>(l), 1) : 0.0;
    best = std::max(best, tokens / (cost.verify[l] / cost.verify[0] + drafts));
  }
  return best;
}

}  // namespace brigade::bench

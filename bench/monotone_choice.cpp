#include "bench/monotone_choice.hpp"

namespace brigade::bench {

std::vector<size_t> monotone_choice(const std::vector<std::vector<double>>& figures) {
  if (figures.empty() || figures[0].empty()) return std::vector<size_t>(figures.size(), 0);
  const size_t n = figures.size(), m = figures[0].size();
  // best[r][k]: the largest sum over rows 0..r with row r choosing k; from[r][k]: row r - 1's
  // choice on that path (the best of columns 0..k in row r - 1).
  std::vector<std::vector<double>> best(n, std::vector<double>(m));
  std::vector<std::vector<size_t>> from(n, std::vector<size_t>(m, 0));
  best[0] = figures[0];
  for (size_t r = 1; r < n; ++r) {
    size_t arg = 0;
    for (size_t k = 0; k < m; ++k) {
      if (best[r - 1][k] > best[r - 1][arg]) arg = k;
      best[r][k] = best[r - 1][arg] + figures[r][k];
      from[r][k] = arg;
    }
  }
  std::vector<size_t> choice(n, 0);
  for (size_t k = 1; k < m; ++k) {
    if (best[n - 1][k] > best[n - 1][choice[n - 1]]) choice[n - 1] = k;
  }
  for (size_t r = n - 1; r > 0; --r)
    choice[r - 1] = from[r][choice[r]];
  return choice;
}

}  // namespace brigade::bench

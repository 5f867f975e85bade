#include "bench/sample_statistics.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

using namespace brigade::bench;

namespace {

// `count` groups of `per_group` a's and b's drawn from one distribution, a's scaled by
// `a_scale`. With `shared_noise` a group's a's share one factor and its b's another, as steps
// during a migration and the steps after it each share a stretch of the host's noise.
std::vector<sample_group> groups_of(int count, int per_group, double a_scale, bool shared_noise,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> step(0.0, 0.1), stretch(0.0, 0.3);
  std::vector<sample_group> out(static_cast<size_t>(count));
  for (auto& g : out) {
    const double factor_a = shared_noise ? stretch(rng) : 1.0;
    const double factor_b = shared_noise ? stretch(rng) : 1.0;
    for (int i = 0; i < per_group; ++i) {
      g.a.push_back(a_scale * factor_a * step(rng));
      g.b.push_back(factor_b * step(rng));
    }
  }
  return out;
}

double width(const ratio_interval& i) {
  return i.high - i.low;
}

}  // namespace

TEST_CASE("quantile is the nearest rank of the sorted values", "[bench][statistics]") {
  std::vector<double> values;
  for (int i = 1; i <= 101; ++i)
    values.push_back(i);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(7));
  CHECK(quantile(values, 0.0) == 1);
  CHECK(quantile(values, 0.5) == 51);
  CHECK(quantile(values, 0.99) == 100);
  CHECK(quantile(values, 1.0) == 101);
  CHECK(quantile({4, 1, 3, 2}, 0.5) == 3);  // index round(1.5) = 2 of 1 2 3 4
  CHECK(quantile({42}, 0.99) == 42);
  CHECK(quantile({}, 0.5) == 0);
}

TEST_CASE("a ratio that every group shares has no spread", "[bench][statistics]") {
  std::vector<sample_group> same = groups_of(30, 20, 1.0, true, 1);
  for (auto& g : same)
    g.a = g.b;
  const ratio_interval equal = bootstrap_quantile_ratio(same, 0.99);
  CHECK(equal.low == Approx(1.0));
  CHECK(equal.high == Approx(1.0));
  CHECK(equal.groups == 30);
  for (auto& g : same) {
    for (double& v : g.a)
      v *= 1.25;
  }
  const ratio_interval scaled = bootstrap_quantile_ratio(same, 0.99);
  CHECK(scaled.low == Approx(1.25));
  CHECK(scaled.high == Approx(1.25));
}

TEST_CASE("the interval holds the true ratio and excludes a false one", "[bench][statistics]") {
  const ratio_interval none = bootstrap_quantile_ratio(groups_of(200, 20, 1.0, false, 2), 0.99);
  CHECK(none.low < 1.0);
  CHECK(none.high > 1.0);
  CHECK(none.high < 1.1);
  const ratio_interval slower = bootstrap_quantile_ratio(groups_of(200, 20, 1.3, false, 3), 0.99);
  CHECK(slower.low > 1.15);
  CHECK(slower.low < 1.3);
  CHECK(slower.high > 1.3);
}

TEST_CASE("samples that are slow together widen the interval", "[bench][statistics]") {
  // The same samples, once kept in their groups and once each a group of its own: resampling
  // them one by one would pretend that a noisy stretch of the run was many independent draws.
  const std::vector<sample_group> blocks = groups_of(40, 25, 1.0, true, 4);
  std::vector<sample_group> singles;
  for (const auto& g : blocks) {
    for (size_t i = 0; i < g.a.size(); ++i)
      singles.push_back({{g.a[i]}, {g.b[i]}});
  }
  const ratio_interval kept = bootstrap_quantile_ratio(blocks, 0.5);
  const ratio_interval split = bootstrap_quantile_ratio(singles, 0.5);
  CHECK(width(kept) > 1.5 * width(split));
  CHECK(kept.low < 1.0);
  CHECK(kept.high > 1.0);
}

TEST_CASE("the bootstrap is repeatable and says when it cannot bound", "[bench][statistics]") {
  const std::vector<sample_group> g = groups_of(50, 10, 1.1, true, 5);
  const ratio_interval first = bootstrap_quantile_ratio(g, 0.99, 500, 9);
  const ratio_interval again = bootstrap_quantile_ratio(g, 0.99, 500, 9);
  CHECK(first.low == again.low);
  CHECK(first.high == again.high);
  CHECK(bootstrap_quantile_ratio({}, 0.99).high == 0);
  CHECK(bootstrap_quantile_ratio({{{1.0, 2.0}, {}}}, 0.99).high == 0);  // no b to compare with
}

// A draft row's statistics against the same figures computed in double precision, one exp at a
// time.
#include "model/logit_statistics.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace brigade::model;

namespace {

logit_statistics exact(const std::vector<float>& row) {
  logit_statistics out;
  for (size_t v = 1; v < row.size(); ++v) {
    if (row[v] > row[static_cast<size_t>(out.best)]) out.best = static_cast<int32_t>(v);
  }
  double sum = 0.0, weighted = 0.0;
  for (float z : row) {
    const double shifted = static_cast<double>(z) - row[static_cast<size_t>(out.best)];
    sum += std::exp(shifted);
    weighted += std::exp(shifted) * shifted;
  }
  out.probability = static_cast<float>(1.0 / sum);
  out.entropy = static_cast<float>(std::log(sum) - weighted / sum);
  return out;
}

}  // namespace

TEST_CASE("a draft row's statistics match the exact ones", "[logit_statistics]") {
  std::mt19937 rng(7);
  for (int n : {1, 5, 8, 13, 4096, 4099, 151936}) {
    for (float spread : {0.1f, 3.0f, 30.0f}) {
      std::normal_distribution<float> logit(0.0f, spread);
      std::vector<float> row(static_cast<size_t>(n));
      for (float& z : row)
        z = logit(rng);
      const logit_statistics got = logit_statistics_of(row.data(), n);
      const logit_statistics want = exact(row);
      INFO("n " << n << " spread " << spread);
      CHECK(got.best == want.best);
      CHECK(got.probability == Approx(want.probability).epsilon(1e-5));
      CHECK(got.entropy == Approx(want.entropy).epsilon(1e-4).margin(1e-5));
    }
  }
}

TEST_CASE("a draft row's statistics: ties, a certain choice, masked tokens", "[logit_statistics]") {
  // Ties go to the first index, as greedy decoding's argmax does.
  std::vector<float> tie(16, 1.0f);
  const logit_statistics even = logit_statistics_of(tie.data(), 16);
  CHECK(even.best == 0);
  CHECK(even.probability == Approx(1.0 / 16));
  CHECK(even.entropy == Approx(std::log(16.0)));
  // One token far ahead of the rest, and tokens masked to -inf: probability 1, entropy 0.
  std::vector<float> sure(40, -std::numeric_limits<float>::infinity());
  sure[3] = 0.0f;
  sure[21] = -200.0f;
  const logit_statistics certain = logit_statistics_of(sure.data(), 40);
  CHECK(certain.best == 3);
  CHECK(certain.probability == 1.0f);
  CHECK(certain.entropy == Approx(0.0).margin(1e-6));
}

TEST_CASE("a draft row's best token is the first largest, as a scan finds it, at any length",
          "[logit_statistics]") {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> coarse(-4, 4);  // few distinct values: many ties
  for (int n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 100, 1023, 4096, 4101}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> row(static_cast<size_t>(n));
      for (auto& v : row)
        v = static_cast<float>(coarse(rng));
      if (trial % 5 == 0) row[static_cast<size_t>(n - 1)] = 9.0f;  // the largest in the tail
      if (trial % 7 == 1 && n > 2) {  // signed zeros compare equal: the first wins
        row[0] = 0.0f;
        row[1] = -0.0f;
      }
      int32_t scan = 0;
      for (int v = 1; v < n; ++v) {
        if (row[static_cast<size_t>(v)] > row[static_cast<size_t>(scan)]) scan = v;
      }
      INFO("n " << n << " trial " << trial);
      CHECK(logit_statistics_of(row.data(), n).best == scan);
    }
  }
  // A NaN anywhere: the scan's answer still (it never prefers a NaN after index 0).
  std::vector<float> odd = {1.0f, 5.0f, std::nanf(""), 7.0f, 2.0f, 7.0f, 0.0f, 0.0f, 3.0f};
  CHECK(logit_statistics_of(odd.data(), 9).best == 3);
}

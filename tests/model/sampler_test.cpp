// Greedy decoding's argmax: the vector search must give the index a scalar scan gives (the first
// largest), whatever the row holds, since every topology and the CPU reference compare tokens.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/sampler.hpp"

using brigade::model::argmax;

namespace {

int32_t scan(const std::vector<float>& row) {
  int32_t best = 0;
  for (size_t v = 1; v < row.size(); ++v) {
    if (row[v] > row[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);
  }
  return best;
}

}  // namespace

TEST_CASE("argmax is the first largest logit, as a scan finds it, at any length", "[sampler]") {
  std::mt19937 rng(29);
  std::uniform_int_distribution<int> coarse(-3, 3);  // few distinct values: ties everywhere
  const float inf = std::numeric_limits<float>::infinity();
  for (int n : {1, 2, 7, 8, 9, 16, 23, 64, 1000, 4096, 4103}) {
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<float> row(static_cast<size_t>(n));
      for (auto& v : row)
        v = static_cast<float>(coarse(rng));
      const auto at = [&](int i) -> float& { return row[static_cast<size_t>(i % n)]; };
      switch (trial % 6) {
        case 1:  // the largest only in the tail past the last full vector
          at(n - 1) = 8.0f;
          break;
        case 2:  // every token masked but some
          for (auto& v : row)
            v = -inf;
          at(n / 2) = -1.0f;
          at(n - 1) = -1.0f;
          break;
        case 3:  // all masked: the first
          for (auto& v : row)
            v = -inf;
          break;
        case 4:  // a NaN before and after the largest: a scan never prefers it
          at(n / 3) = std::nanf("");
          at(n - 1) = std::nanf("");
          at(n / 2) = 9.0f;
          break;
        case 5:  // a NaN first: a scan keeps index 0, since nothing compares greater
          at(0) = std::nanf("");
          break;
        default:
          break;
      }
      INFO("n " << n << " trial " << trial);
      CHECK(argmax(row.data(), n) == scan(row));
    }
  }
}

TEST_CASE("greedy sampling draws the argmax", "[sampler]") {
  std::vector<float> row(4096, 0.5f);
  row[3000] = 2.0f;
  row[3500] = 2.0f;
  brigade::model::sampling_params greedy;
  greedy.temperature = 0.0f;
  CHECK(brigade::model::sample(row.data(), 4096, greedy, 7) == 3000);
}

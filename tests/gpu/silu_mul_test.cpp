// The CPU's silu_mul: eight lanes at a time with the eight-lane exp, the tail with std::exp, so
// within float rounding of silu(g) * up everywhere (large and tiny gates too), and a row's result
// the same bits whatever rows share the call and however many threads run it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/backend.hpp"
#include "gpu/cpu/kernels.hpp"

using namespace brigade;
using namespace brigade::gpu;

namespace {

std::vector<float> silu_rows(const std::vector<float>& gate_up, int rows, int inter,
                             thread_pool& pool) {
  std::vector<float> in = gate_up;
  std::vector<float> out(static_cast<size_t>(rows) * inter, -1.0f);
  cpu::silu_mul(tensor{in.data(), rows, 2 * inter, 2 * inter},
                tensor{out.data(), rows, inter, inter}, pool);
  return out;
}

}  // namespace

TEST_CASE("silu_mul is silu(gate) * up within float rounding, the same bits in any batch",
          "[silu_mul]") {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f);
  thread_pool one(1), three(3);
  for (int inter : {1, 7, 8, 9, 100, 384}) {
    const int rows = 11;
    std::vector<float> gate_up(static_cast<size_t>(rows) * 2 * inter);
    for (auto& v : gate_up)
      v = wide(rng);
    // Gates where exp(-g) overflows or underflows, and zeros of both signs.
    const float extremes[] = {-100.0f, -88.5f, -87.0f, 87.5f, 100.0f, 0.0f, -0.0f, 1e-30f};
    for (size_t i = 0; i < std::size(extremes) && i < static_cast<size_t>(inter); ++i)
      gate_up[i] = extremes[i];
    const auto batched = silu_rows(gate_up, rows, inter, three);
    const auto serial = silu_rows(gate_up, rows, inter, one);
    REQUIRE(std::memcmp(batched.data(), serial.data(), batched.size() * sizeof(float)) == 0);
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row(gate_up.begin() + static_cast<long>(r) * 2 * inter,
                                   gate_up.begin() + static_cast<long>(r + 1) * 2 * inter);
      const auto alone = silu_rows(row, 1, inter, three);
      REQUIRE(std::memcmp(alone.data(), batched.data() + static_cast<size_t>(r) * inter,
                          alone.size() * sizeof(float)) == 0);
      for (int i = 0; i < inter; ++i) {
        const double g = row[static_cast<size_t>(i)], up = row[static_cast<size_t>(inter + i)];
        const double want = g / (1.0 + std::exp(-g)) * up;
        const double got = alone[static_cast<size_t>(i)];
        INFO("inter " << inter << " row " << r << " element " << i << " gate " << g);
        REQUIRE(std::fabs(got - want) <= 1e-6 * std::max(1.0, std::fabs(want)));
      }
    }
  }
}

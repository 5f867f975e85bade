// The reduction order of the CUDA matmul, written as a host function.
//
// Each output element y[m][n] = sum_k x[m][k] * W[n][k] is computed by one warp in an order that
// depends only on k, never on the batch size, the tile shape or the row's place in the batch:
//
//   1. k is cut into chunks of 8 consecutive elements; chunk c belongs to lane c % 32.
//   2. Each lane starts from +0 and runs a fused multiply-add chain over its chunks in increasing
//      order, and over each chunk's elements in increasing order.
//   3. The 32 lane sums are combined by a butterfly: for offset 16, 8, 4, 2, 1 every lane adds
//      the value of lane (its index XOR offset). Addition commutes, so all lanes end equal.
//   4. The bias, if any, is added last.
//
// Tests compare the GPU against this function bit for bit. Plain C++: no CUDA headers.
#pragma once

#include <algorithm>
#include <cmath>

namespace brigade::gpu::cuda {

/// Elements of k per chunk; weight rows in device memory are padded to whole chunks.
constexpr int matrix_chunk = 8;
/// Lanes that split k: one warp.
constexpr int matmul_lanes = 32;

inline float canonical_dot(const float* x, const float* w, int k) {
  constexpr int lanes = matmul_lanes;
  constexpr int chunk = matrix_chunk;
  float lane_sum[lanes] = {};
  const int chunks = (k + chunk - 1) / chunk;
  for (int c = 0; c < chunks; ++c) {
    float& acc = lane_sum[c % lanes];
    for (int i = c * chunk; i < std::min(k, (c + 1) * chunk); ++i)
      acc = std::fma(x[i], w[i], acc);
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    float next[lanes];
    for (int i = 0; i < lanes; ++i)
      next[i] = lane_sum[i] + lane_sum[i ^ offset];
    std::copy(next, next + lanes, lane_sum);
  }
  return lane_sum[0];
}

}  // namespace brigade::gpu::cuda

// Shared helpers of the CUDA backend tests: finding a device (or skipping), moving tensors, and
// seeded random data.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/device_probe.hpp"

namespace brigade::gpu::test {

/// The CUDA backend on `device`, or null when there is no CUDA device at all, after a Catch2
/// WARN "no CUDA device: <reason>" (which ctest reports as a skip). A device that exists but
/// cannot be used fails the test instead.
std::unique_ptr<backend> cuda_or_skip(int device = 0);

/// Every visible CUDA device, or an empty vector after the same WARN.
std::vector<std::unique_ptr<backend>> all_cuda_or_skip();

/// Uniform values in [low, high) from a seeded generator.
std::vector<float> random_floats(std::mt19937& rng, size_t count, float low = -1.0f,
                                 float high = 1.0f);

/// A backend activation [rows, cols] holding `host` (dense, row-major).
activation to_device(backend& dev, const std::vector<float>& host, int rows, int cols);

/// A dense host copy of `t`.
std::vector<float> to_host(backend& dev, const tensor& t);

/// Largest |a[i] - b[i]|, or infinity when a difference is NaN.
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

/// Weights of a random matrix in `type`, rows x cols, as host bytes.
struct random_weights {
  std::vector<unsigned char> bytes;
  host_matrix view;
  /// The same weights widened to float32.
  std::vector<float> widened;
};
random_weights make_weights(std::mt19937& rng, dtype type, int rows, int cols);

}  // namespace brigade::gpu::test

/// Starts a test case that needs a CUDA device: binds `dev` or returns after the skip warning.
#define BRIGADE_CUDA_DEVICE_OR_SKIP(dev)           \
  auto dev = ::brigade::gpu::test::cuda_or_skip(); \
  if (!dev) return

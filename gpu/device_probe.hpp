// Which accelerators this process can use, and the factory for the CUDA backend.
//
// Both functions exist whether or not brigade was built with CUDA, so callers (the CLI's
// --device option, tests, benchmarks) need no #ifdefs: without CUDA, probe_cuda() reports
// "built without CUDA" and make_cuda_backend() returns that as an error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"

namespace brigade::gpu {

/// One visible CUDA device.
struct device_info {
  int index = 0;          ///< The CUDA device ordinal.
  std::string name;       ///< e.g. "NVIDIA H200".
  int compute_major = 0;  ///< Compute capability, e.g. 9 for sm_90.
  int compute_minor = 0;
  size_t memory_bytes = 0;  ///< Total device memory.
};

/// What probe_cuda() found.
struct device_report {
  bool built_with_cuda = false;      ///< Whether this binary contains the CUDA backend.
  std::vector<device_info> devices;  ///< Empty when there is no usable device.
  std::string reason;                ///< Why there is no device; empty when there are some.

  int count() const { return static_cast<int>(devices.size()); }
  /// One line for logs: the devices, or why there are none.
  std::string describe() const;
};

/// Lists the CUDA devices. Never fails: a missing driver, no device or a binary built without
/// CUDA are all reported as a count of zero and a reason.
device_report probe_cuda();

/// A CUDA backend on device `device` with its own stream. Fails when the binary has no CUDA
/// backend, no device has that ordinal, or the device cannot be initialised.
result<std::unique_ptr<backend>> make_cuda_backend(int device);

}  // namespace brigade::gpu

// CUDA error handling for the backend. Included only by files in gpu/cuda/.
//
// Two kinds of failure are kept apart. Creating a backend returns errors as values. A CUDA call
// that fails inside a backend operation means the device can no longer be trusted (a dead
// component, not a request error), so it throws cuda_failure, which the worker that owns the
// backend reports as its own death.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "common/result.hpp"

namespace brigade::gpu::cuda {

class cuda_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)".
std::string describe(cudaError_t e, const char* what);

/// Throws cuda_failure naming `what` when `e` is not cudaSuccess.
void check(cudaError_t e, const char* what);

/// Throws when the last kernel launch failed (bad configuration, missing sm_90 image, ...).
void check_launch(const char* kernel);

/// `e` as an error value: errc::unavailable naming `what`.
error to_error(cudaError_t e, const char* what);

/// Makes `device` current for this thread for the guard's lifetime. The backend's methods may
/// be called from any thread, and each thread has its own current device. Destructors pass
/// `throw_on_error` false: they cannot report a failure, and the next CUDA call will.
class device_guard {
 public:
  explicit device_guard(int device, bool throw_on_error = true);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace brigade::gpu::cuda

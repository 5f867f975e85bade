#include "gpu/cuda/check.hpp"

namespace brigade::gpu::cuda {

std::string describe(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw cuda_failure("CUDA " + describe(e, what));
}

void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

error to_error(cudaError_t e, const char* what) {
  return error(errc::unavailable, "CUDA " + describe(e, what));
}

device_guard::device_guard(int device, bool throw_on_error) {
  cudaError_t e = cudaGetDevice(&previous_);
  if (e == cudaSuccess && previous_ == device) {
    previous_ = -1;
    return;
  }
  if (e == cudaSuccess) e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    previous_ = -1;
    if (throw_on_error) check(e, "selecting the backend's device");
  }
}

device_guard::~device_guard() {
  // Restoring is best effort: a destructor must not throw, and the previous device was valid.
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace brigade::gpu::cuda

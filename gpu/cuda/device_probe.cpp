// The device probe and backend factory of a binary built with CUDA.
#include "gpu/device_probe.hpp"

#include <cuda_runtime.h>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/cuda_backend.hpp"
#include "gpu/cuda/kernels.hpp"

namespace brigade::gpu {

device_report probe_cuda() {
  device_report r;
  r.built_with_cuda = true;
  int count = 0;
  // Without a driver this is cudaErrorInsufficientDriver rather than cudaErrorNoDevice: any
  // error means there is no usable device.
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    int driver = 0;
    int runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    r.reason = cuda::describe(e, "cudaGetDeviceCount") + "; driver API version " +
               std::to_string(driver) + ", runtime " + std::to_string(runtime);
    // A driver older than the runtime is a GPU machine that cannot run this build: say what
    // to do, so that nobody mistakes it for a machine without a GPU.
    if (driver > 0 && driver < runtime) {
      r.reason +=
          " (the NVIDIA driver is older than the CUDA runtime this binary was built "
          "with: install a driver that supports CUDA " +
          std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) + " or newer)";
    }
    return r;
  }
  if (count == 0) {
    r.reason = "the CUDA driver reports no devices";
    return r;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    r.devices.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem});
  }
  if (r.devices.empty()) r.reason = "no device answered cudaGetDeviceProperties";
  return r;
}

result<std::unique_ptr<backend>> make_cuda_backend(int device) {
  const device_report report = probe_cuda();
  if (report.devices.empty()) {
    return error(errc::unavailable, "no CUDA device: " + report.reason);
  }
  if (device < 0 || device >= report.count()) {
    return error(errc::not_found,
                 "CUDA device " + std::to_string(device) + " does not exist; " + report.describe());
  }
  const device_info& info = report.devices[static_cast<size_t>(device)];
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda::to_error(e, "cudaSetDevice");
  cudaStream_t stream = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda::to_error(e, "cudaStreamCreateWithFlags");
  // A binary built for other architectures has no kernel image for this device: find out now
  // rather than at the first operation.
  e = cuda::run_probe_kernel(stream);
  if (e != cudaSuccess) {
    cudaStreamDestroy(stream);
    return error(errc::unsupported,
                 cuda::describe(e, "probe kernel") + " on " + info.name + " (sm_" +
                     std::to_string(info.compute_major) + std::to_string(info.compute_minor) +
                     "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=" +
                     std::to_string(info.compute_major) + std::to_string(info.compute_minor));
  }
  try {
    return std::unique_ptr<backend>(
        std::make_unique<cuda::cuda_backend>(device, info.name, stream));
  } catch (const cuda::cuda_failure& f) {
    cudaStreamDestroy(stream);
    return error(errc::unavailable, f.what());
  }
}

}  // namespace brigade::gpu

// The device probe of a binary built without the CUDA backend (BRIGADE_WITH_CUDA=OFF, or no
// nvcc/NCCL found): there is never a device, and the reason says how to get one.
#include "gpu/device_probe.hpp"

namespace brigade::gpu {
namespace {

const char* const not_built =
    "built without CUDA (configure with -DBRIGADE_WITH_CUDA=ON on a machine with nvcc and NCCL)";

}  // namespace

device_report probe_cuda() {
  device_report r;
  r.reason = not_built;
  return r;
}

result<std::unique_ptr<backend>> make_cuda_backend(int) {
  return error(errc::unsupported, std::string("no CUDA backend: ") + not_built);
}

}  // namespace brigade::gpu

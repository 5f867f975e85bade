#include "gpu/device_probe.hpp"

namespace brigade::gpu {

std::string device_report::describe() const {
  if (devices.empty()) return "no CUDA device: " + reason;
  std::string out = std::to_string(devices.size()) + " CUDA device(s):";
  for (const device_info& d : devices) {
    out += " [" + std::to_string(d.index) + "] " + d.name + " (sm_" +
           std::to_string(d.compute_major) + std::to_string(d.compute_minor) + ", " +
           std::to_string(d.memory_bytes >> 30) + " GiB)";
  }
  return out;
}

}  // namespace brigade::gpu

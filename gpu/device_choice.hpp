// Which device a process, or one role of a manifest, computes on: `cpu` or `cuda:N`. One parser
// for the manifest's `device` fields and the command line's --device, and the checks, made
// before anything is loaded, that the device exists and holds what is asked of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "gpu/device_probe.hpp"

namespace brigade::gpu {

/// A device: the CPU (the default), or the CUDA device of one ordinal.
struct device_choice {
  bool cuda = false;
  int ordinal = 0;  ///< The CUDA device ordinal; 0 on the CPU.

  /// "cpu" or "cuda:N", as parse_device reads it.
  std::string to_string() const;
  bool operator==(const device_choice& o) const { return cuda == o.cuda && ordinal == o.ordinal; }
  bool operator!=(const device_choice& o) const { return !(*this == o); }
  bool operator<(const device_choice& o) const {
    return cuda != o.cuda ? !cuda : ordinal < o.ordinal;
  }
};

/// The forms parse_device accepts, for messages.
extern const char* const device_forms;

/// "cpu" or "cuda:N" (N a decimal ordinal, 0 to 1023). Anything else is refused with an error
/// naming `field` (e.g. "roles.decode.device" or "--device"), the value and the accepted forms.
result<device_choice> parse_device(const std::string& text, const std::string& field);

/// OK when `device` is the CPU or a device `report` lists. Otherwise an error naming `who` (the
/// role, or the command), the device asked for, what the probe found, and what to do. Pure:
/// tests pass a report of their own.
status check_device_present(const device_choice& device, const device_report& report,
                            const std::string& who);

/// What one role (or the weights a process shares on a device) needs of a device's memory.
struct device_need {
  std::string who;  ///< "decode-0 (decode on node local): KV for 65536 tokens"
  uint64_t bytes = 0;
};

/// OK when the needs together fit in `device_bytes`, the memory of `device` (`device_name`,
/// e.g. "NVIDIA H200"). Otherwise an error naming each need, their sum and the device's bytes.
/// Pure, so that tests can pass a small device.
status check_device_memory(const std::vector<device_need>& needs, uint64_t device_bytes,
                           const device_choice& device, const std::string& device_name);

/// "12.3 GiB (13207024435 bytes)", for messages about memory.
std::string describe_bytes(uint64_t bytes);

/// A backend on `device`: the CPU backend on `pool` (the process-wide pool when null), or the
/// CUDA backend of that ordinal (whose own errors say why it cannot be had).
result<std::unique_ptr<backend>> make_backend(const device_choice& device,
                                              thread_pool* pool = nullptr);

/// make_backend on `device` once check_device_present has found it on this machine (probed
/// only for a CUDA device), so that a command refuses an absent device before it loads anything,
/// naming `who` (e.g. "--device") and what to do.
result<std::unique_ptr<backend>> open_backend(const device_choice& device, const std::string& who,
                                              thread_pool* pool = nullptr);

}  // namespace brigade::gpu

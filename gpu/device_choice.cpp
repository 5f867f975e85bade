#include "gpu/device_choice.hpp"

#include <cstdio>

namespace brigade::gpu {
namespace {

constexpr int max_ordinal = 1023;

// What to do when the device is not there: the CPU always is.
const char* const what_to_do =
    "use device cpu (--device cpu), or run on a machine with that CUDA device";

}  // namespace

const char* const device_forms = "cpu or cuda:N, N a CUDA device ordinal such as cuda:0";

std::string device_choice::to_string() const {
  return cuda ? "cuda:" + std::to_string(ordinal) : "cpu";
}

result<device_choice> parse_device(const std::string& text, const std::string& field) {
  if (text == "cpu") return device_choice{};
  const std::string prefix = "cuda:";
  bool good = text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0 &&
              text.size() - prefix.size() <= 4;
  int ordinal = 0;
  for (size_t i = prefix.size(); good && i < text.size(); ++i) {
    good = text[i] >= '0' && text[i] <= '9';
    ordinal = ordinal * 10 + (text[i] - '0');
  }
  if (good && ordinal <= max_ordinal) return device_choice{true, ordinal};
  return error(errc::bad_format,
               "field '" + field + "' is '" + text + "'; it must be " + device_forms);
}

status check_device_present(const device_choice& device, const device_report& report,
                            const std::string& who) {
  if (!device.cuda) return ok_status();
  const std::string asked = who + " asks for device " + device.to_string() + ", but ";
  if (report.devices.empty()) {
    return error(errc::unavailable,
                 asked + "this machine has no CUDA device (" + report.reason + "): " + what_to_do);
  }
  for (const device_info& d : report.devices) {
    if (d.index == device.ordinal) return ok_status();
  }
  return error(errc::not_found, asked + "there is no CUDA device " +
                                    std::to_string(device.ordinal) + " (" + report.describe() +
                                    "): name one of them, or " + what_to_do);
}

std::string describe_bytes(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f GiB (%llu bytes)",
                static_cast<double>(bytes) / double(uint64_t{1} << 30),
                static_cast<unsigned long long>(bytes));
  return text;
}

status check_device_memory(const std::vector<device_need>& needs, uint64_t device_bytes,
                           const device_choice& device, const std::string& device_name) {
  uint64_t total = 0;
  std::string parts;
  for (const device_need& n : needs) {
    total += n.bytes;
    parts += (parts.empty() ? "" : "; ") + n.who + " " + describe_bytes(n.bytes);
  }
  if (total <= device_bytes) return ok_status();
  return error(errc::resource_exhausted,
               "device " + device.to_string() + " (" + device_name + ") has " +
                   describe_bytes(device_bytes) + " of memory, but what runs on it needs " +
                   describe_bytes(total) + ": " + parts +
                   "; lower kv_tokens or the expert slots, or spread the roles over more devices");
}

result<std::unique_ptr<backend>> make_backend(const device_choice& device, thread_pool* pool) {
  if (!device.cuda) return make_cpu_backend(pool);
  return make_cuda_backend(device.ordinal);
}

result<std::unique_ptr<backend>> open_backend(const device_choice& device, const std::string& who,
                                              thread_pool* pool) {
  if (device.cuda) {
    status present = check_device_present(device, probe_cuda(), who);
    if (!present) return present.err();
  }
  return make_backend(device, pool);
}

}  // namespace brigade::gpu

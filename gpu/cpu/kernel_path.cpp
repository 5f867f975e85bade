#include "gpu/cpu/kernel_path.hpp"

#include <cstdlib>
#include <stdexcept>

#include "gpu/cpu/amx_availability.hpp"

namespace brigade::gpu::cpu {

const char* kernel_path_name(kernel_path path) {
  switch (path) {
    case kernel_path::avx2:
      return "avx2";
    case kernel_path::avx512:
      return "avx512";
    case kernel_path::avx512_bf16:
      return "avx512_bf16";
    case kernel_path::amx_bf16:
      return "amx_bf16";
  }
  return "unknown";
}

kernel_numerics numerics_of(kernel_path path) {
  return path == kernel_path::avx512_bf16 || path == kernel_path::amx_bf16
             ? kernel_numerics::bf16_dot
             : kernel_numerics::f32;
}

const char* numerics_name(kernel_numerics numerics) {
  return numerics == kernel_numerics::bf16_dot ? "bf16-dot" : "f32";
}

bool kernel_path_available(kernel_path path) {
  // __builtin_cpu_supports also checks XCR0, so a feature the kernel does not save on context
  // switches (AVX-512 state under some hypervisors) counts as absent.
  switch (path) {
    case kernel_path::avx2:
      // Every CPU with AVX2 and FMA also has F16C (clang's builtin cannot test F16C).
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case kernel_path::avx512:
      return kernel_path_available(kernel_path::avx2) && __builtin_cpu_supports("avx512f");
    case kernel_path::avx512_bf16:
      // vpermw (AVX512BW) interleaves a panel's pairs of k; AVX512VL stores half vectors.
      return kernel_path_available(kernel_path::avx512) && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    case kernel_path::amx_bf16:
      return amx_process_status().usable;
  }
  return false;
}

namespace {

constexpr kernel_path every_path[] = {kernel_path::avx2, kernel_path::avx512,
                                      kernel_path::avx512_bf16, kernel_path::amx_bf16};

}  // namespace

std::vector<kernel_path> available_kernel_paths() {
  std::vector<kernel_path> paths;
  for (kernel_path p : every_path) {
    if (kernel_path_available(p)) paths.push_back(p);
  }
  return paths;
}

kernel_path best_kernel_path() {
  return kernel_path_available(kernel_path::avx512) ? kernel_path::avx512 : kernel_path::avx2;
}

namespace {

std::string path_list() {
  std::string list;
  for (kernel_path p : available_kernel_paths())
    list += (list.empty() ? "" : ", ") + std::string(kernel_path_name(p));
  return list.empty() ? "none" : list;
}

}  // namespace

result<kernel_path> choose_kernel_path(std::string_view request) {
  if (request == "auto") return best_kernel_path();
  for (kernel_path p : every_path) {
    if (request != kernel_path_name(p)) continue;
    if (!kernel_path_available(p)) {
      const std::string lacking = p == kernel_path::amx_bf16
                                      ? "cannot run here: " + amx_process_status().why
                                      : "needs instructions this CPU lacks";
      return error(errc::unsupported, "CPU kernel path '" + std::string(request) + "' " + lacking +
                                          " (available: " + path_list() + ")");
    }
    return p;
  }
  return error(errc::invalid_argument,
               "unknown CPU kernel path '" + std::string(request) +
                   "' (expected auto, avx2, avx512, avx512_bf16 or amx_bf16)");
}

kernel_path process_kernel_path() {
  static const result<kernel_path> chosen = [] {
    const char* env = std::getenv("BRIGADE_CPU_KERNELS");
    return choose_kernel_path(env && *env ? env : "auto");
  }();
  if (!chosen) throw std::runtime_error("BRIGADE_CPU_KERNELS: " + chosen.err().message);
  return chosen.value();
}

const char* process_numerics_name() {
  return numerics_name(numerics_of(process_kernel_path()));
}

std::string describe_kernel_paths(kernel_path in_use) {
  return std::string(kernel_path_name(in_use)) + ", numerics " +
         numerics_name(numerics_of(in_use)) + " (available: " + path_list() + ")";
}

}  // namespace brigade::gpu::cpu

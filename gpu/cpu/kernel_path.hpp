// The instruction set the CPU kernels run on, chosen at run time.
//
// brigade is compiled for a fixed baseline (x86-64-v3: AVX2, FMA, F16C) and carries the wider
// kernels in translation units of their own, compiled for their instruction set only; a process
// picks the best path its CPU has, or the one BRIGADE_CPU_KERNELS names. Every path computes each
// output element with the same float32 operations in the same order, so all of them give the same
// bits: the choice changes speed, never results (docs/cpu_kernels.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::gpu::cpu {

enum class kernel_path {
  avx2,    ///< AVX2 and FMA on 256-bit vectors: the baseline every build runs on.
  avx512,  ///< AVX-512F on 512-bit vectors: one register per 16-column weight panel.
};

/// "avx2" or "avx512": the names BRIGADE_CPU_KERNELS and `bench engine --kernels` take.
const char* kernel_path_name(kernel_path path);

/// Whether this CPU, and the operating system's saved register state, can run `path`.
bool kernel_path_available(kernel_path path);

/// The paths this machine can run, the baseline first.
std::vector<kernel_path> available_kernel_paths();

/// The fastest path this machine can run.
kernel_path best_kernel_path();

/// A path by name: "auto" is the best available, "avx2" or "avx512" that path if this machine
/// can run it. An unknown name or a path this CPU lacks is an error that says which paths exist.
result<kernel_path> choose_kernel_path(std::string_view request);

/// The process's path: BRIGADE_CPU_KERNELS ("auto" when unset), read once. Throws
/// std::runtime_error with choose_kernel_path's message when the variable asks for something
/// this machine cannot run: a forced path is never silently replaced by another.
kernel_path process_kernel_path();

/// One line for logs: the path in use and the others available, e.g. "avx512 (available: avx2,
/// avx512)".
std::string describe_kernel_paths(kernel_path in_use);

}  // namespace brigade::gpu::cpu

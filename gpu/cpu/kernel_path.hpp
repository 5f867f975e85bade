// The instruction set the CPU kernels run on, chosen at run time.
//
// brigade is compiled for a fixed baseline (x86-64-v3: AVX2, FMA, F16C) and carries the wider
// kernels in translation units of their own, compiled for their instruction set only; a process
// picks the best exact path its CPU has, or the one BRIGADE_CPU_KERNELS names. The exact paths
// compute each output element with the same float32 operations in the same order, so they give
// the same bits: choosing among them changes speed, never results. The bf16 dot-product paths
// (vectors or AMX tiles, the same bits as each other) round activations to bf16 and belong to
// another numerics class: they are only ever run when asked for, and a deployment refuses to mix
// classes (docs/cpu_kernels.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::gpu::cpu {

enum class kernel_path {
  avx2,    ///< AVX2 and FMA on 256-bit vectors: the baseline every build runs on.
  avx512,  ///< AVX-512F on 512-bit vectors: one register per 16-column weight panel.
  /// AVX512-BF16 dot products on bf16 weights (activations rounded to bf16, pairs of k per
  /// instruction); f32 and f16 weights as on avx512. Never chosen by "auto".
  avx512_bf16,
  /// AMX tiles (tdpbf16ps) on bf16 weights: the avx512_bf16 path's chain and bits, 16 rows by
  /// 16 features by 32 k an instruction; f32 and f16 weights as on avx512. Never chosen by
  /// "auto"; offered where amx_process_status() says usable.
  amx_bf16,
};

/// Which results a path gives: paths of one class give the same bits, paths of different classes
/// do not. Every process of a deployment, and every block of its KV cache, is of one class.
enum class kernel_numerics {
  f32,       ///< float32 FMA chains (avx2, avx512)
  bf16_dot,  ///< bf16 products summed in pairs by vdpbf16ps or tdpbf16ps (avx512_bf16, amx_bf16)
};

/// The class a path belongs to.
kernel_numerics numerics_of(kernel_path path);

/// "f32" or "bf16-dot": what nodes report and refusals name.
const char* numerics_name(kernel_numerics numerics);

/// "avx2", "avx512", "avx512_bf16" or "amx_bf16": the names BRIGADE_CPU_KERNELS and `bench engine
/// --kernels` take.
const char* kernel_path_name(kernel_path path);

/// Whether this CPU, and the operating system's saved register state, can run `path`.
bool kernel_path_available(kernel_path path);

/// The paths this machine can run, the baseline first.
std::vector<kernel_path> available_kernel_paths();

/// The fastest exact (f32 numerics) path this machine can run: what "auto" means.
kernel_path best_kernel_path();

/// A path by name: "auto" is the best exact one available, any other name that path if this machine
/// can run it. An unknown name or a path this CPU lacks is an error that says which paths exist.
result<kernel_path> choose_kernel_path(std::string_view request);

/// The process's path: BRIGADE_CPU_KERNELS ("auto" when unset), read once. Throws
/// std::runtime_error with choose_kernel_path's message when the variable asks for something
/// this machine cannot run: a forced path is never silently replaced by another.
kernel_path process_kernel_path();

/// numerics_name() of process_kernel_path(): what this process reports to a coordinator and
/// stamps on its KV blocks. Throws as process_kernel_path() does.
const char* process_numerics_name();

/// One line for logs: the path in use and the others available, e.g. "avx512 (available: avx2,
/// avx512)".
std::string describe_kernel_paths(kernel_path in_use);

}  // namespace brigade::gpu::cpu

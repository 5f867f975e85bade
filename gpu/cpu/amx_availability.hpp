// Whether this process can run the AMX kernel path (kernel_path::amx_bf16), and if not, why.
//
// Three things must hold: the CPU has AMX-TILE and AMX-BF16 (and AVX512-BF16, which the path
// uses beside the tiles); the operating system saves tile state and grants it to this process
// (Linux 5.16 or later, arch_prctl ARCH_REQ_XCOMP_PERM); and the tiles, on a check product run
// once, give the avx512_bf16 path's bits, which is what puts both paths in one numerics class.
// A CPU that breaks that promise is reported, not used.
#pragma once

#include <string>

namespace brigade::gpu::cpu {

struct amx_status {
  bool usable = false;
  std::string why;  ///< when not usable: what is missing, in words for an error message
};

/// Checked once per process (the permission request and the check product run on first call).
const amx_status& amx_process_status();

}  // namespace brigade::gpu::cpu

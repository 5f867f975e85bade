// The CPU backend with a chosen kernel path, for tests and benchmarks that compare paths in one
// process. Everything else takes gpu::make_cpu_backend(), which runs process_kernel_path().
#pragma once

#include <memory>

#include "gpu/backend.hpp"
#include "gpu/cpu/kernel_path.hpp"

namespace brigade::gpu::cpu {

/// The CPU backend on `pool` (the process-wide pool when null), its matmuls on `path`. Throws
/// std::runtime_error when this machine cannot run `path`.
std::unique_ptr<backend> make_backend(thread_pool* pool, kernel_path path);

}  // namespace brigade::gpu::cpu

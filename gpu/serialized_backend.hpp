// A backend that many threads may call: each call runs under one mutex, then goes to the backend
// it wraps. The CUDA backend takes one caller at a time (its staging ring and result scratch are
// its own), while the roles of one process (decode and prefill workers, expert shards) each run
// on threads of their own; on one stream their calls are ordered anyway, so serialising the calls
// costs the GPU nothing and keeps one copy of the weights for all of them.
#pragma once

#include <memory>
#include <mutex>

#include "gpu/backend.hpp"

namespace brigade::gpu {

/// A view of `shared` whose calls hold `lock`; several views may share both (the whole-device
/// view and the expert shards' view of one model context).
std::unique_ptr<backend> make_serialized_backend(std::shared_ptr<backend> shared,
                                                 std::shared_ptr<std::mutex> lock);

}  // namespace brigade::gpu

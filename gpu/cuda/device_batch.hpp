// Attention metadata in device memory, shared by the launchers and the kernels. Plain C++.
#pragma once

#include <cstdint>

namespace brigade::gpu::cuda {

/// attention_batch with its arrays copied to device memory.
struct device_batch {
  const int32_t* positions = nullptr;
  const int32_t* token_seq = nullptr;
  const int32_t* block_offsets = nullptr;
  const int32_t* block_ids = nullptr;
  int tokens = 0;
  int seqs = 0;
};

/// Head dimensions the attention kernel supports (each lane of a warp owns head_dim / 32).
constexpr int max_attention_head_dim = 256;

}  // namespace brigade::gpu::cuda

// The one layout KV blocks have outside a worker's KV storage, and the copies in and out of it.
//
// A packed block covers block_tokens tokens of every layer: for layer 0, 1, ... its keys then its
// values, each [block_tokens, kv_heads * head_dim] float32 (what gpu::backend::read_kv_block
// copies out, one layer at a time); only the keys when the layout's values alias its keys (MLA).
// Hand-offs from prefill to decode workers, demotions to the KV store and blocks fetched back from
// it all travel in this layout (kvcache/block_payload.hpp keeps the same bytes on the host and SSD
// tiers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/backend.hpp"

namespace brigade::actors {

class kv_block_codec {
 public:
  /// Blocks of `kv`'s layout on `dev`.
  kv_block_codec(gpu::backend& dev, gpu::kv_storage& kv);

  /// Floats of one packed block (all layers, keys and values).
  size_t block_floats() const { return planes_ * layers_ * half_floats_; }
  size_t block_bytes() const { return block_floats() * sizeof(float); }

  /// Copies `count` blocks out of the storage into `out` (count * block_floats() floats).
  void pack(const int32_t* blocks, size_t count, float* out) const;
  /// Copies `count` packed blocks from `in` into the storage's blocks.
  void unpack(const float* in, const int32_t* blocks, size_t count) const;
  /// One packed block from bytes that need not be aligned for floats (a message's payload).
  void unpack_bytes(const uint8_t* in, int32_t block) const;

 private:
  gpu::backend* dev_;
  gpu::kv_storage* kv_;
  size_t layers_ = 0;
  size_t planes_ = 2;       // 1 when values alias keys
  size_t half_floats_ = 0;  // keys (or values) of one layer of one block
};

}  // namespace brigade::actors

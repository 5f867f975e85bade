#include "actors/kv_block_codec.hpp"

#include <cstring>
#include <vector>

namespace brigade::actors {

kv_block_codec::kv_block_codec(gpu::backend& dev, gpu::kv_storage& kv) : dev_(&dev), kv_(&kv) {
  const gpu::kv_layout& l = kv.layout();
  layers_ = static_cast<size_t>(l.layers);
  planes_ = static_cast<size_t>(l.planes());
  half_floats_ = static_cast<size_t>(l.block_tokens) * static_cast<size_t>(l.kv_heads) *
                 static_cast<size_t>(l.head_dim);
}

void kv_block_codec::pack(const int32_t* blocks, size_t count, float* out) const {
  for (size_t b = 0; b < count; ++b) {
    for (size_t l = 0; l < layers_; ++l) {
      dev_->read_kv_block(*kv_, static_cast<int>(l), blocks[b], out,
                          planes_ == 2 ? out + half_floats_ : nullptr);
      out += planes_ * half_floats_;
    }
  }
}

void kv_block_codec::unpack(const float* in, const int32_t* blocks, size_t count) const {
  for (size_t b = 0; b < count; ++b) {
    for (size_t l = 0; l < layers_; ++l) {
      dev_->write_kv_block(*kv_, static_cast<int>(l), blocks[b], in,
                           planes_ == 2 ? in + half_floats_ : nullptr);
      in += planes_ * half_floats_;
    }
  }
}

void kv_block_codec::unpack_bytes(const uint8_t* in, int32_t block) const {
  std::vector<float> aligned(block_floats());
  std::memcpy(aligned.data(), in, block_bytes());
  unpack(aligned.data(), &block, 1);
}

}  // namespace brigade::actors

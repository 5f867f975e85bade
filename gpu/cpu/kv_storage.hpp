// The CPU's KV cache memory: keys and values of every layer, block, slot and KV head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"

namespace brigade::gpu::cpu {

/// Keys and values in one allocation each (keys only when the layout's values alias its keys).
/// Elements are float32, or bfloat16 bits when the layout's element type is bf16.
///
/// Values are stored by row: a slot's values of every KV head, each head's head_dim elements in
/// a run. Keys are stored by column where they can be: within a block, element d of KV head h of
/// all the block's slots in a run, so that attention scores eight or sixteen positions with one
/// load per element instead of transposing rows first. Where values alias keys (multi-head latent
/// attention) the one stored row serves as both, so keys stay rows. BRIGADE_KV_KEYS=row, read
/// when a storage is made, keeps them rows everywhere: the layout before keys by column, which
/// `brigade bench attention` measures beside it. Outside this class the layout is always rows:
/// kv_write takes them, read_kv_block and write_kv_block exchange them, and attention gives the
/// same bits over either layout.
class cpu_kv_storage final : public kv_storage {
 public:
  explicit cpu_kv_storage(const kv_layout& layout);
  const kv_layout& layout() const override { return layout_; }
  size_t bytes() const override {
    return (keys_.size() + values_.size()) * sizeof(float) +
           (keys16_.size() + values16_.size()) * sizeof(uint16_t);
  }
  bool is_bf16() const { return layout_.element == dtype::bf16; }
  /// Whether keys are stored by column (every layout whose values do not alias its keys, unless
  /// BRIGADE_KV_KEYS=row).
  bool keys_by_column() const { return keys_by_column_; }

  /// The keys of `block` in `layer` from `slot`, T being float (float32) or uint16_t (bfloat16
  /// bits). By column: element d of KV head h at slot + i is at [(h * head_dim + d) *
  /// block_tokens + i]. By row: at [i * kv_heads * head_dim + h * head_dim + d].
  template <class T>
  T* keys_at(int layer, int block, int slot);
  template <class T>
  const T* keys_at(int layer, int block, int slot) const {
    return const_cast<cpu_kv_storage*>(this)->keys_at<T>(layer, block, slot);
  }
  /// The values the same way, always by row (the key rows where values alias keys).
  template <class T>
  T* values_at(int layer, int block, int slot);
  template <class T>
  const T* values_at(int layer, int block, int slot) const {
    return const_cast<cpu_kv_storage*>(this)->values_at<T>(layer, block, slot);
  }

 private:
  size_t block_offset(int layer, int block) const {
    return (static_cast<size_t>(layer) * static_cast<size_t>(layout_.blocks) +
            static_cast<size_t>(block)) *
           static_cast<size_t>(layout_.block_tokens) * row_floats_;
  }
  size_t key_offset(int layer, int block, int slot) const {
    const size_t step = keys_by_column() ? 1 : row_floats_;
    return block_offset(layer, block) + static_cast<size_t>(slot) * step;
  }
  size_t value_offset(int layer, int block, int slot) const {
    return block_offset(layer, block) + static_cast<size_t>(slot) * row_floats_;
  }

  kv_layout layout_;
  bool keys_by_column_ = true;
  size_t row_floats_ = 0;  // elements of one row: kv_heads * head_dim
  std::vector<float> keys_;
  std::vector<float> values_;
  std::vector<uint16_t> keys16_;
  std::vector<uint16_t> values16_;
};

template <>
inline float* cpu_kv_storage::keys_at<float>(int layer, int block, int slot) {
  return keys_.data() + key_offset(layer, block, slot);
}
template <>
inline uint16_t* cpu_kv_storage::keys_at<uint16_t>(int layer, int block, int slot) {
  return keys16_.data() + key_offset(layer, block, slot);
}
template <>
inline float* cpu_kv_storage::values_at<float>(int layer, int block, int slot) {
  return (layout_.values_alias_keys ? keys_.data() : values_.data()) +
         value_offset(layer, block, slot);
}
template <>
inline uint16_t* cpu_kv_storage::values_at<uint16_t>(int layer, int block, int slot) {
  return (layout_.values_alias_keys ? keys16_.data() : values16_.data()) +
         value_offset(layer, block, slot);
}

}  // namespace brigade::gpu::cpu

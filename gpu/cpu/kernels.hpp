// CPU kernels behind the backend operations (see gpu/backend.hpp for their contracts).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::gpu::cpu {

void rms_norm(const tensor& x, const float* weight, int group, float eps, const tensor& y,
              thread_pool& pool);
void rope(const tensor& x, const int32_t* positions, int heads, int head_dim,
          const float* cos_table, const float* sin_table, thread_pool& pool);
void silu_mul(const tensor& gate_up, const tensor& out, thread_pool& pool);
void add(const tensor& x, const tensor& y);
void clamp(const tensor& x, float limit);
void gather_rows(const tensor& src, const int32_t* rows, const tensor& dst);
void scatter_rows(const tensor& src, const int32_t* rows, const tensor& dst);
void router_topk(const tensor& logits, const router_spec& spec, int32_t* experts, float* weights);
void combine(const tensor& x, const tensor& y, const float* weights, int k, const tensor* shared,
             const tensor* shared_gate);

/// Keys and values of every layer, block, slot and KV head, in one allocation each (keys only
/// when the layout's values alias its keys: value() then reads the key rows). Elements are float32,
/// or bfloat16 bits when the layout's element type is bf16: then key16()/value16() hold the rows
/// and key()/value() must not be called.
class cpu_kv_storage final : public kv_storage {
 public:
  explicit cpu_kv_storage(const kv_layout& layout);
  const kv_layout& layout() const override { return layout_; }
  size_t bytes() const override {
    return (keys_.size() + values_.size()) * sizeof(float) +
           (keys16_.size() + values16_.size()) * sizeof(uint16_t);
  }
  bool is_bf16() const { return layout_.element == dtype::bf16; }

  /// The keys (or values) of all KV heads at `slot` of `block` in `layer` (float32 storage).
  float* key(int layer, int block, int slot) { return keys_.data() + offset(layer, block, slot); }
  float* value(int layer, int block, int slot) {
    return values_base() + offset(layer, block, slot);
  }
  const float* key(int layer, int block, int slot) const {
    return keys_.data() + offset(layer, block, slot);
  }
  const float* value(int layer, int block, int slot) const {
    return const_cast<cpu_kv_storage*>(this)->values_base() + offset(layer, block, slot);
  }
  /// The same rows of a bfloat16 storage.
  uint16_t* key16(int layer, int block, int slot) {
    return keys16_.data() + offset(layer, block, slot);
  }
  uint16_t* value16(int layer, int block, int slot) {
    return values16_base() + offset(layer, block, slot);
  }
  const uint16_t* key16(int layer, int block, int slot) const {
    return keys16_.data() + offset(layer, block, slot);
  }
  const uint16_t* value16(int layer, int block, int slot) const {
    return const_cast<cpu_kv_storage*>(this)->values16_base() + offset(layer, block, slot);
  }

 private:
  float* values_base() { return layout_.values_alias_keys ? keys_.data() : values_.data(); }
  uint16_t* values16_base() {
    return layout_.values_alias_keys ? keys16_.data() : values16_.data();
  }
  size_t offset(int layer, int block, int slot) const {
    return ((static_cast<size_t>(layer) * layout_.blocks + static_cast<size_t>(block)) *
                static_cast<size_t>(layout_.block_tokens) +
            static_cast<size_t>(slot)) *
           row_floats_;
  }

  kv_layout layout_;
  size_t row_floats_ = 0;  // elements of one row: kv_heads * head_dim
  std::vector<float> keys_;
  std::vector<float> values_;
  std::vector<uint16_t> keys16_;
  std::vector<uint16_t> values16_;
};

void kv_write(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
              const attention_batch& batch);
/// One block of one layer as float32 host rows (bfloat16 widened exactly), and back (rounded to
/// nearest even: exact for values a bf16 storage gave out).
void read_kv_block(const cpu_kv_storage& kv, int layer, int block, float* keys, float* values);
void write_kv_block(cpu_kv_storage& kv, int layer, int block, const float* keys,
                    const float* values);
void attention(const tensor& q, const cpu_kv_storage& kv, int layer, const attention_batch& batch,
               int heads, float scale, int window, const tensor& out, thread_pool& pool);

}  // namespace brigade::gpu::cpu

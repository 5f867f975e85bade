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
/// when the layout's values alias its keys: value() then reads the key rows).
class cpu_kv_storage final : public kv_storage {
 public:
  explicit cpu_kv_storage(const kv_layout& layout);
  const kv_layout& layout() const override { return layout_; }
  size_t bytes() const override { return (keys_.size() + values_.size()) * sizeof(float); }

  /// The keys (or values) of all KV heads at `slot` of `block` in `layer`.
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

 private:
  float* values_base() { return layout_.values_alias_keys ? keys_.data() : values_.data(); }
  size_t offset(int layer, int block, int slot) const {
    return ((static_cast<size_t>(layer) * layout_.blocks + static_cast<size_t>(block)) *
                static_cast<size_t>(layout_.block_tokens) +
            static_cast<size_t>(slot)) *
           row_floats_;
  }

  kv_layout layout_;
  size_t row_floats_ = 0;
  std::vector<float> keys_;
  std::vector<float> values_;
};

void kv_write(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
              const attention_batch& batch);
void attention(const tensor& q, const cpu_kv_storage& kv, int layer, const attention_batch& batch,
               int heads, float scale, int window, const tensor& out, thread_pool& pool);

}  // namespace brigade::gpu::cpu

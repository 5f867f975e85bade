// CPU kernels behind the backend operations (see gpu/backend.hpp for their contracts).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cpu/kv_storage.hpp"

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

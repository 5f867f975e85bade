// Paged KV storage and causal attention on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/kernels.hpp"
#include "gpu/cpu/vector_math.hpp"

namespace brigade::gpu::cpu {

cpu_kv_storage::cpu_kv_storage(const kv_layout& layout)
    : layout_(layout),
      row_floats_(static_cast<size_t>(layout.kv_heads) * static_cast<size_t>(layout.head_dim)) {
  const size_t total = static_cast<size_t>(layout.layers) * static_cast<size_t>(layout.blocks) *
                       static_cast<size_t>(layout.block_tokens) * row_floats_;
  keys_.assign(total, 0.0f);
  values_.assign(total, 0.0f);
}

namespace {

struct slot_ref {
  int block;
  int slot;
};

slot_ref locate(const attention_batch& batch, int seq, int pos, int block_tokens) {
  const int32_t* table = batch.block_ids + batch.block_offsets[seq];
  return {table[pos / block_tokens], pos % block_tokens};
}

}  // namespace

void kv_write(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
              const attention_batch& batch) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(k.cols);
  const int bt = kv.layout().block_tokens;
  for (int t = 0; t < batch.tokens; ++t) {
    const slot_ref s = locate(batch, batch.token_seq[t], batch.positions[t], bt);
    std::memcpy(kv.key(layer, s.block, s.slot), k.row(t), row_bytes);
    std::memcpy(kv.value(layer, s.block, s.slot), v.row(t), row_bytes);
  }
}

void attention(const tensor& q, const cpu_kv_storage& kv, int layer, const attention_batch& batch,
               int heads, float scale, int window, const tensor& out, thread_pool& pool) {
  const kv_layout& lay = kv.layout();
  const int head_dim = lay.head_dim;
  const int group = heads / lay.kv_heads;
  const size_t items = static_cast<size_t>(batch.tokens) * static_cast<size_t>(heads);
  pool.parallel_for(items, 4, [&](size_t begin, size_t end) {
    thread_local std::vector<float> scores;
    for (size_t item = begin; item < end; ++item) {
      const int t = static_cast<int>(item / static_cast<size_t>(heads));
      const int h = static_cast<int>(item % static_cast<size_t>(heads));
      const int kv_head = h / group;
      const int seq = batch.token_seq[t];
      const int len = batch.positions[t] + 1;
      const int first = window > 0 ? std::max(0, len - window) : 0;
      const float* qv = q.row(t) + static_cast<ptrdiff_t>(h) * head_dim;
      scores.resize(static_cast<size_t>(len));
      float max = -INFINITY;
      for (int p = first; p < len; ++p) {
        const slot_ref s = locate(batch, seq, p, lay.block_tokens);
        const float* key = kv.key(layer, s.block, s.slot) + kv_head * head_dim;
        const float score = dot(qv, key, head_dim) * scale;
        scores[static_cast<size_t>(p)] = score;
        max = std::max(max, score);
      }
      float sum = 0.0f;
      for (int p = first; p < len; ++p) {
        const float e = std::exp(scores[static_cast<size_t>(p)] - max);
        scores[static_cast<size_t>(p)] = e;
        sum += e;
      }
      float* o = out.row(t) + static_cast<ptrdiff_t>(h) * head_dim;
      std::fill(o, o + head_dim, 0.0f);
      for (int p = first; p < len; ++p) {
        const slot_ref s = locate(batch, seq, p, lay.block_tokens);
        const float* value = kv.value(layer, s.block, s.slot) + kv_head * head_dim;
        axpy(scores[static_cast<size_t>(p)] / sum, value, o, head_dim);
      }
    }
  });
}

}  // namespace brigade::gpu::cpu

// The CPU's KV storage: its allocation, and rows in and out of its layout (kv_storage.hpp).
#include "gpu/cpu/kv_storage.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gpu/cpu/kernels.hpp"
#include "gpu/dtype.hpp"

namespace brigade::gpu::cpu {

namespace {

bool keys_by_row_asked() {
  const char* keys = std::getenv("BRIGADE_KV_KEYS");
  return keys != nullptr && std::string(keys) == "row";
}

}  // namespace

cpu_kv_storage::cpu_kv_storage(const kv_layout& layout)
    : layout_(layout),
      keys_by_column_(!layout.values_alias_keys && !keys_by_row_asked()),
      row_floats_(static_cast<size_t>(layout.kv_heads) * static_cast<size_t>(layout.head_dim)) {
  const size_t total = static_cast<size_t>(layout.layers) * static_cast<size_t>(layout.blocks) *
                       static_cast<size_t>(layout.block_tokens) * row_floats_;
  if (layout.element != dtype::f32 && layout.element != dtype::bf16) {
    throw std::invalid_argument("KV storage element type " +
                                std::string(dtype_name(layout.element)) +
                                " is not one of float32, bfloat16");
  }
  if (is_bf16()) {
    keys16_.assign(total, 0);
    if (!layout.values_alias_keys) values16_.assign(total, 0);
    return;
  }
  keys_.assign(total, 0.0f);
  if (!layout.values_alias_keys) values_.assign(total, 0.0f);
}

namespace {

// What a storage of element type T keeps of x: x itself, or its bfloat16 rounding (to nearest
// even). And back: the stored element as float32 (bfloat16 widened exactly).
inline void store(float x, float& out) {
  out = x;
}
inline void store(float x, uint16_t& out) {
  out = f32_to_bf16(x);
}
inline float load(float x) {
  return x;
}
inline float load(uint16_t x) {
  return bf16_to_f32(x);
}

// One row (a slot's kv_heads * head_dim elements) into the keys at `slot` of a block, or out of
// them: a run where keys are rows, a column element each where they are columns.
template <class T>
void put_key_row(cpu_kv_storage& kv, int layer, int block, int slot, const float* row) {
  const kv_layout& l = kv.layout();
  const int n = l.kv_heads * l.head_dim;
  T* keys = kv.keys_at<T>(layer, block, slot);
  const size_t step = kv.keys_by_column() ? static_cast<size_t>(l.block_tokens) : 1;
  for (int i = 0; i < n; ++i)
    store(row[i], keys[static_cast<size_t>(i) * step]);
}

template <class T>
void get_key_row(const cpu_kv_storage& kv, int layer, int block, int slot, float* row) {
  const kv_layout& l = kv.layout();
  const int n = l.kv_heads * l.head_dim;
  const T* keys = kv.keys_at<T>(layer, block, slot);
  const size_t step = kv.keys_by_column() ? static_cast<size_t>(l.block_tokens) : 1;
  for (int i = 0; i < n; ++i)
    row[i] = load(keys[static_cast<size_t>(i) * step]);
}

template <class T>
void put_value_row(cpu_kv_storage& kv, int layer, int block, int slot, const float* row) {
  const kv_layout& l = kv.layout();
  T* values = kv.values_at<T>(layer, block, slot);
  for (int i = 0; i < l.kv_heads * l.head_dim; ++i)
    store(row[i], values[i]);
}

template <class T>
void get_value_row(const cpu_kv_storage& kv, int layer, int block, int slot, float* row) {
  const kv_layout& l = kv.layout();
  const T* values = kv.values_at<T>(layer, block, slot);
  for (int i = 0; i < l.kv_heads * l.head_dim; ++i)
    row[i] = load(values[i]);
}

template <class T>
void write_rows(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
                const attention_batch& batch) {
  const int bt = kv.layout().block_tokens;
  const bool both = !kv.layout().values_alias_keys;
  for (int t = 0; t < batch.tokens; ++t) {
    const int pos = batch.positions[t];
    const int32_t* table = batch.block_ids + batch.block_offsets[batch.token_seq[t]];
    const int block = table[pos / bt], slot = pos % bt;
    put_key_row<T>(kv, layer, block, slot, k.row(t));
    if (both) put_value_row<T>(kv, layer, block, slot, v.row(t));
  }
}

template <class T>
void read_block(const cpu_kv_storage& kv, int layer, int block, float* keys, float* values) {
  const kv_layout& l = kv.layout();
  const size_t row = static_cast<size_t>(l.kv_heads) * static_cast<size_t>(l.head_dim);
  for (int s = 0; s < l.block_tokens; ++s) {
    get_key_row<T>(kv, layer, block, s, keys + static_cast<size_t>(s) * row);
    if (!l.values_alias_keys)
      get_value_row<T>(kv, layer, block, s, values + static_cast<size_t>(s) * row);
  }
}

template <class T>
void write_block(cpu_kv_storage& kv, int layer, int block, const float* keys, const float* values) {
  const kv_layout& l = kv.layout();
  const size_t row = static_cast<size_t>(l.kv_heads) * static_cast<size_t>(l.head_dim);
  for (int s = 0; s < l.block_tokens; ++s) {
    put_key_row<T>(kv, layer, block, s, keys + static_cast<size_t>(s) * row);
    if (!l.values_alias_keys)
      put_value_row<T>(kv, layer, block, s, values + static_cast<size_t>(s) * row);
  }
}

}  // namespace

void kv_write(cpu_kv_storage& kv, int layer, const tensor& k, const tensor& v,
              const attention_batch& batch) {
  if (kv.is_bf16()) return write_rows<uint16_t>(kv, layer, k, v, batch);
  write_rows<float>(kv, layer, k, v, batch);
}

void read_kv_block(const cpu_kv_storage& kv, int layer, int block, float* keys, float* values) {
  if (kv.is_bf16()) return read_block<uint16_t>(kv, layer, block, keys, values);
  read_block<float>(kv, layer, block, keys, values);
}

void write_kv_block(cpu_kv_storage& kv, int layer, int block, const float* keys,
                    const float* values) {
  if (kv.is_bf16()) return write_block<uint16_t>(kv, layer, block, keys, values);
  write_block<float>(kv, layer, block, keys, values);
}

}  // namespace brigade::gpu::cpu

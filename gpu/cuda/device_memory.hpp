// Device memory owned by the CUDA backend: activation buffers, weight matrices and the paged KV
// cache. Included only by files in gpu/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cuda/matmul_order.hpp"

namespace brigade::gpu::cuda {

/// `bytes` of zeroed device memory on `device`, freed on destruction.
class device_buffer final : public buffer {
 public:
  device_buffer(int device, cudaStream_t stream, size_t bytes);
  ~device_buffer() override;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  void* data() override { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  int device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// A weight matrix in device memory, in its file dtype, row-major with each row padded to a
/// multiple of matrix_chunk elements (the padding is zero and never read as weights), so that
/// every chunk of every row starts on a 16-byte boundary.
class device_matrix final : public matrix {
 public:
  /// Stacks the rows of `parts` (same cols and dtype) and copies them to the device.
  device_matrix(int device, cudaStream_t stream, const std::vector<host_matrix>& parts);

  int rows() const override { return rows_; }
  int cols() const override { return cols_; }
  dtype type() const override { return type_; }
  size_t bytes() const override { return storage_.bytes(); }

  /// Elements between the starts of two rows.
  int pitch() const { return pitch_; }
  const void* data() const { return storage_.data(); }

 private:
  int rows_;
  int cols_;
  int pitch_;
  dtype type_;
  device_buffer storage_;
};

/// Keys and values of every layer, block, slot and KV head, laid out as the CPU backend does:
/// [layer][block][slot][kv_head * head_dim], keys and values in two allocations (keys only when
/// the layout's values alias its keys: values() then points at the keys).
class device_kv final : public kv_storage {
 public:
  device_kv(int device, cudaStream_t stream, const kv_layout& layout);

  const kv_layout& layout() const override { return layout_; }
  size_t bytes() const override { return keys_.bytes() + values_.bytes(); }

  /// Elements of layout().element: float, or the bits of a bfloat16.
  void* keys() { return keys_.data(); }
  void* values() { return layout_.values_alias_keys ? keys() : values_.data(); }
  const void* keys() const { return keys_.data(); }
  const void* values() const { return layout_.values_alias_keys ? keys() : values_.data(); }

 private:
  kv_layout layout_;
  device_buffer keys_;
  device_buffer values_;
};

}  // namespace brigade::gpu::cuda

#include "gpu/cuda/device_memory.hpp"

#include <stdexcept>
#include <string>

#include "gpu/cuda/check.hpp"

namespace brigade::gpu::cuda {
namespace {

size_t checked_rows(const std::vector<host_matrix>& parts) {
  if (parts.empty()) throw std::invalid_argument("device_matrix: no parts to stack");
  size_t rows = 0;
  for (const host_matrix& p : parts) {
    if (p.cols != parts[0].cols || p.type != parts[0].type) {
      throw std::invalid_argument("device_matrix: stacked parts differ in columns or dtype");
    }
    if (p.rows < 0 || p.cols <= 0) {
      throw std::invalid_argument("device_matrix: a part has shape " + std::to_string(p.rows) +
                                  " x " + std::to_string(p.cols));
    }
    rows += static_cast<size_t>(p.rows);
  }
  return rows;
}

int padded_pitch(int cols) {
  return (cols + matrix_chunk - 1) / matrix_chunk * matrix_chunk;
}

size_t kv_elements(const kv_layout& l) {
  return static_cast<size_t>(l.layers) * static_cast<size_t>(l.blocks) *
         static_cast<size_t>(l.block_tokens) * static_cast<size_t>(l.kv_heads) *
         static_cast<size_t>(l.head_dim);
}

}  // namespace

device_buffer::device_buffer(int device, cudaStream_t stream, size_t bytes)
    : device_(device), bytes_(bytes) {
  device_guard guard(device_);
  // Allocate at least one byte so that data() is a valid, distinct pointer for empty buffers.
  check(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc");
  // Zeroed like the CPU backend's buffers; queued on the backend's stream so that no later
  // kernel on it can see the memory before the clear.
  check(cudaMemsetAsync(data_, 0, bytes == 0 ? 1 : bytes, stream), "cudaMemsetAsync");
}

device_buffer::~device_buffer() {
  // cudaFree waits for work using the memory; errors cannot be reported from a destructor.
  device_guard guard(device_, false);
  cudaFree(data_);
}

device_matrix::device_matrix(int device, cudaStream_t stream, const std::vector<host_matrix>& parts)
    : rows_(static_cast<int>(checked_rows(parts))),
      cols_(parts[0].cols),
      pitch_(padded_pitch(parts[0].cols)),
      type_(parts[0].type),
      storage_(device, stream,
               static_cast<size_t>(rows_) * static_cast<size_t>(pitch_) * dtype_size(type_)) {
  device_guard guard(device);
  const size_t elem = dtype_size(type_);
  const size_t row_bytes = static_cast<size_t>(cols_) * elem;
  const size_t pitch_bytes = static_cast<size_t>(pitch_) * elem;
  auto* dst = static_cast<unsigned char*>(storage_.data());
  for (const host_matrix& p : parts) {
    if (p.rows > 0) {
      check(cudaMemcpy2DAsync(dst, pitch_bytes, p.data, row_bytes, row_bytes,
                              static_cast<size_t>(p.rows), cudaMemcpyHostToDevice, stream),
            "cudaMemcpy2DAsync (weights)");
    }
    dst += static_cast<size_t>(p.rows) * pitch_bytes;
  }
  // The host rows may be a mapping the caller closes right after: finish the copy now.
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (weights)");
}

device_kv::device_kv(int device, cudaStream_t stream, const kv_layout& layout)
    : layout_(layout),
      keys_(device, stream, dtype_size(layout.element) * kv_elements(layout)),
      values_(device, stream,
              layout.values_alias_keys ? 0 : dtype_size(layout.element) * kv_elements(layout)) {}

}  // namespace brigade::gpu::cuda

// Views of float32 activations in a backend's memory, and the buffers that own them.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>

namespace brigade::gpu {

/// Memory owned by one backend (host memory on the CPU backend, device memory on CUDA).
class buffer {
 public:
  virtual ~buffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

/// A float32 matrix [rows, cols] whose rows lie `stride` floats apart. Does not own memory.
struct tensor {
  float* data = nullptr;
  int rows = 0;
  int cols = 0;
  int stride = 0;

  float* row(int r) const { return data + static_cast<ptrdiff_t>(r) * stride; }
  /// Rows [begin, begin + count) of this tensor.
  tensor rows_view(int begin, int count) const {
    assert(begin >= 0 && count >= 0 && begin + count <= rows);
    return tensor{row(begin), count, cols, stride};
  }
  /// Columns [begin, begin + count) of every row.
  tensor cols_view(int begin, int count) const {
    assert(begin >= 0 && count >= 0 && begin + count <= cols);
    return tensor{data + begin, rows, count, stride};
  }
};

/// A tensor together with the buffer that owns it.
class activation {
 public:
  activation() = default;
  activation(std::unique_ptr<buffer> buf, int rows, int cols)
      : buf_(std::move(buf)), view_{static_cast<float*>(buf_->data()), rows, cols, cols} {}

  const tensor& view() const { return view_; }
  /// The first `rows` rows (the buffer may have been sized for a larger batch).
  tensor first(int rows) const { return view_.rows_view(0, rows); }
  int capacity_rows() const { return view_.rows; }

 private:
  std::unique_ptr<buffer> buf_;
  tensor view_;
};

}  // namespace brigade::gpu

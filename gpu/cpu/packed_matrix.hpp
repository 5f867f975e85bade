// Weight matrices repacked for the CPU matmul kernel.
//
// Layout: the output features are cut into panels of 16; a panel stores, for every input feature
// k, its 16 weights contiguously (k-major). The kernel then streams one panel front to back while
// it accumulates 16 outputs per row with vector FMAs, in order of k: each output element is the
// same sequence of fused multiply-adds whatever the batch size or thread split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/backend.hpp"

namespace brigade::gpu::cpu {

constexpr int panel_width = 16;

class packed_matrix final : public matrix {
 public:
  /// Stacks the rows of `parts` (all with the same column count and dtype) and packs them.
  /// Weights keep their file dtype: bf16 and f16 widen to float32 exactly inside the kernel.
  static std::unique_ptr<packed_matrix> pack(const std::vector<host_matrix>& parts);

  int rows() const override { return rows_; }
  int cols() const override { return cols_; }
  dtype type() const override { return type_; }
  size_t bytes() const override { return storage_.size(); }

  int panels() const { return (rows_ + panel_width - 1) / panel_width; }
  /// Start of panel p: cols() groups of 16 elements of type().
  const void* panel(int p) const {
    return storage_.data() + static_cast<size_t>(p) * cols_ * panel_width * dtype_size(type_);
  }
  /// The matrix as pack() took it: rows() x cols() elements of type(), row-major.
  void unpack(void* out) const;
  /// Row r of the original matrix, widened to float32 (used for embedding lookups).
  void read_row(int r, float* out) const;

 private:
  packed_matrix(int rows, int cols, dtype type);

  int rows_ = 0;
  int cols_ = 0;
  dtype type_ = dtype::f32;
  std::vector<unsigned char> storage_;
};

}  // namespace brigade::gpu::cpu

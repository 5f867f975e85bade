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

  /// The rows of `parts` quantized to int8 for the int8 dot-product kernels (gemm_int8.cpp): row n
  /// becomes round(W[n][k] / s[n]) with s[n] its largest magnitude / 127. Not exact: for a draft
  /// model, whose every token the target verifies. Panels of 16 rows hold groups of 4 k, 64 bytes
  /// a group (lane-major, then k), the k padded with zeros to a multiple of 4.
  static std::unique_ptr<packed_matrix> pack_int8(const std::vector<host_matrix>& parts);

  int rows() const override { return rows_; }
  int cols() const override { return cols_; }
  dtype type() const override { return type_; }
  size_t bytes() const override {
    return storage_.size() + scales_.size() * sizeof(float) + sums_.size() * sizeof(int32_t);
  }
  /// Whether pack_int8 made it; then type() is the dtype it was made from.
  bool int8() const { return int8_; }
  /// int8: groups of 4 k per row (cols() rounded up, divided by 4).
  int k_groups() const { return (cols_ + 3) / 4; }
  /// int8: the start of panel p, k_groups() x 64 bytes.
  const int8_t* int8_panel(int p) const {
    return reinterpret_cast<const int8_t*>(storage_.data()) +
           static_cast<size_t>(p) * k_groups() * 64;
  }
  /// int8: per row (padded to whole panels), its scale s[n] and the sum of its quantized weights.
  const float* row_scales() const { return scales_.data(); }
  const int32_t* row_sums() const { return sums_.data(); }

  int panels() const { return (rows_ + panel_width - 1) / panel_width; }
  /// Start of panel p: cols() groups of 16 elements of type().
  const void* panel(int p) const {
    return storage_.data() + static_cast<size_t>(p) * cols_ * panel_width * dtype_size(type_);
  }
  /// The matrix as pack() took it: rows() x cols() elements of type(), row-major. An int8 matrix
  /// no longer holds those bits: std::logic_error.
  void unpack(void* out) const;
  /// Row r of the original matrix, widened to float32 (used for embedding lookups); of an int8
  /// matrix, its quantized weights times the row's scale.
  void read_row(int r, float* out) const;

 private:
  packed_matrix(int rows, int cols, dtype type);

  int rows_ = 0;
  int cols_ = 0;
  dtype type_ = dtype::f32;
  bool int8_ = false;
  std::vector<unsigned char> storage_;
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
};

}  // namespace brigade::gpu::cpu

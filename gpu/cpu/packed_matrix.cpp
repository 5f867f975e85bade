#include "gpu/cpu/packed_matrix.hpp"

#include <cstring>
#include <stdexcept>

namespace brigade::gpu::cpu {

packed_matrix::packed_matrix(int rows, int cols, dtype type)
    : rows_(rows), cols_(cols), type_(type) {
  const size_t padded_rows = static_cast<size_t>(panels()) * panel_width;
  // Zero padding makes the outputs past `rows` finite; the kernel never stores them.
  storage_.assign(padded_rows * static_cast<size_t>(cols) * dtype_size(type), 0);
}

std::unique_ptr<packed_matrix> packed_matrix::pack(const std::vector<host_matrix>& parts) {
  if (parts.empty()) throw std::invalid_argument("packed_matrix::pack: no parts");
  int rows = 0;
  for (const auto& p : parts) {
    if (p.cols != parts[0].cols || p.type != parts[0].type) {
      throw std::invalid_argument("packed_matrix::pack: parts differ in columns or dtype");
    }
    rows += p.rows;
  }
  std::unique_ptr<packed_matrix> m(new packed_matrix(rows, parts[0].cols, parts[0].type));
  const size_t elem = dtype_size(m->type_);
  const size_t cols = static_cast<size_t>(m->cols_);
  int row = 0;
  for (const auto& p : parts) {
    const auto* src = static_cast<const unsigned char*>(p.data);
    for (int r = 0; r < p.rows; ++r, ++row) {
      const size_t panel = static_cast<size_t>(row / panel_width);
      const size_t lane = static_cast<size_t>(row % panel_width);
      unsigned char* dst = m->storage_.data() + (panel * cols * panel_width + lane) * elem;
      const unsigned char* src_row = src + static_cast<size_t>(r) * cols * elem;
      for (size_t k = 0; k < cols; ++k) {
        std::memcpy(dst + k * panel_width * elem, src_row + k * elem, elem);
      }
    }
  }
  return m;
}

void packed_matrix::unpack(void* out) const {
  const size_t elem = dtype_size(type_);
  const size_t cols = static_cast<size_t>(cols_);
  auto* dst = static_cast<unsigned char*>(out);
  for (int r = 0; r < rows_; ++r) {
    const unsigned char* base =
        storage_.data() + (static_cast<size_t>(r / panel_width) * cols * panel_width +
                           static_cast<size_t>(r % panel_width)) *
                              elem;
    unsigned char* row = dst + static_cast<size_t>(r) * cols * elem;
    for (size_t k = 0; k < cols; ++k)
      std::memcpy(row + k * elem, base + k * panel_width * elem, elem);
  }
}

void packed_matrix::read_row(int r, float* out) const {
  const size_t elem = dtype_size(type_);
  const size_t cols = static_cast<size_t>(cols_);
  const unsigned char* base =
      storage_.data() + (static_cast<size_t>(r / panel_width) * cols * panel_width +
                         static_cast<size_t>(r % panel_width)) *
                            elem;
  for (size_t k = 0; k < cols; ++k)
    to_f32(type_, base + k * panel_width * elem, out + k, 1);
}

}  // namespace brigade::gpu::cpu

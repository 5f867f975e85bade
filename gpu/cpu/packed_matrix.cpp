#include "gpu/cpu/packed_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace brigade::gpu::cpu {

packed_matrix::packed_matrix(int rows, int cols, dtype type)
    : rows_(rows), cols_(cols), type_(type) {
  const size_t padded_rows = static_cast<size_t>(panels()) * panel_width;
  // Zero padding makes the outputs past `rows` finite; the kernel never stores them.
  storage_.assign(padded_rows * static_cast<size_t>(cols) * dtype_size(type), 0);
}

namespace {

// The element as an unsigned integer of its size: packing moves bits, never converts them.
template <class F>
void with_element_type(size_t elem, F&& f) {
  if (elem == 4) {
    f(uint32_t{});
  } else {
    f(uint16_t{});
  }
}

// One panel between row-major rows and the packed k-major layout, where packed[k * 16 + lane] is
// row `lane`'s element k: typed copies, 16 lanes per k, instead of a memcpy call per element
// (every model load and every migrating expert's export goes through here; pack 2-3x, unpack
// 1.3x faster). The 16 row streams advance together, so each stays in cache.
template <class T>
void pack_panel(T* packed, const T* const* rows, int lanes, size_t cols) {
  if (lanes == panel_width) {  // a fixed trip count: one vector store per k
    for (size_t k = 0; k < cols; ++k) {
      T* out = packed + k * panel_width;
      for (int lane = 0; lane < panel_width; ++lane)
        out[lane] = rows[lane][k];
    }
    return;
  }
  for (size_t k = 0; k < cols; ++k) {
    for (int lane = 0; lane < lanes; ++lane)
      packed[k * panel_width + static_cast<size_t>(lane)] = rows[lane][k];
  }
}

template <class T>
void unpack_panel(const T* packed, T* const* rows, int lanes, size_t cols) {
  for (size_t k = 0; k < cols; ++k) {
    const T* in = packed + k * panel_width;
    for (int lane = 0; lane < lanes; ++lane)
      rows[lane][k] = in[lane];
  }
}

}  // namespace

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
  // The source rows of every output row, across the parts.
  with_element_type(elem, [&](auto zero) {
    using T = decltype(zero);
    std::vector<const T*> sources;
    sources.reserve(static_cast<size_t>(rows));
    for (const auto& p : parts) {
      for (int r = 0; r < p.rows; ++r)
        sources.push_back(static_cast<const T*>(p.data) + static_cast<size_t>(r) * cols);
    }
    auto* packed = reinterpret_cast<T*>(m->storage_.data());
    for (int p = 0; p < m->panels(); ++p) {
      pack_panel(packed + static_cast<size_t>(p) * cols * panel_width,
                 sources.data() + p * panel_width, std::min(panel_width, rows - p * panel_width),
                 cols);
    }
  });
  return m;
}

std::unique_ptr<packed_matrix> packed_matrix::pack_int8(const std::vector<host_matrix>& parts) {
  if (parts.empty()) throw std::invalid_argument("packed_matrix::pack_int8: no parts");
  int rows = 0;
  for (const auto& p : parts) {
    if (p.cols != parts[0].cols) {
      throw std::invalid_argument("packed_matrix::pack_int8: parts differ in columns");
    }
    rows += p.rows;
  }
  std::unique_ptr<packed_matrix> m(new packed_matrix(rows, 0, parts[0].type));
  m->cols_ = parts[0].cols;
  m->int8_ = true;
  const size_t cols = static_cast<size_t>(m->cols_);
  const size_t groups = static_cast<size_t>(m->k_groups());
  const size_t padded_rows = static_cast<size_t>(m->panels()) * panel_width;
  m->storage_.assign(padded_rows * groups * 4, 0);
  m->scales_.assign(padded_rows, 0.0f);
  m->sums_.assign(padded_rows, 0);
  std::vector<float> row(cols);
  int n = 0;
  for (const auto& p : parts) {
    const size_t elem = dtype_size(p.type);
    for (int r = 0; r < p.rows; ++r, ++n) {
      to_f32(p.type,
             static_cast<const unsigned char*>(p.data) + static_cast<size_t>(r) * cols * elem,
             row.data(), cols);
      float largest = 0.0f;
      for (float v : row)
        largest = std::max(largest, std::fabs(v));
      const float scale = largest / 127.0f;
      const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
      int32_t sum = 0;
      auto* panel = reinterpret_cast<int8_t*>(m->storage_.data()) +
                    static_cast<size_t>(n / panel_width) * groups * 64;
      const size_t lane = static_cast<size_t>(n % panel_width);
      for (size_t k = 0; k < cols; ++k) {
        const int q = std::clamp(static_cast<int>(std::nearbyint(row[k] * inverse)), -127, 127);
        panel[(k / 4) * 64 + lane * 4 + k % 4] = static_cast<int8_t>(q);
        sum += q;
      }
      m->scales_[static_cast<size_t>(n)] = scale;
      m->sums_[static_cast<size_t>(n)] = sum;
    }
  }
  return m;
}

void packed_matrix::unpack(void* out) const {
  if (int8_)
    throw std::logic_error("an int8-quantized matrix cannot be read back as it was loaded");
  const size_t elem = dtype_size(type_);
  const size_t cols = static_cast<size_t>(cols_);
  with_element_type(elem, [&](auto zero) {
    using T = decltype(zero);
    T* dst = static_cast<T*>(out);
    const auto* packed = reinterpret_cast<const T*>(storage_.data());
    T* rows[panel_width];
    for (int p = 0; p < panels(); ++p) {
      const int lanes = std::min(panel_width, rows_ - p * panel_width);
      for (int lane = 0; lane < lanes; ++lane)
        rows[lane] = dst + static_cast<size_t>(p * panel_width + lane) * cols;
      unpack_panel(packed + static_cast<size_t>(p) * cols * panel_width, rows, lanes, cols);
    }
  });
}

void packed_matrix::read_row(int r, float* out) const {
  if (int8_) {
    const int8_t* panel = int8_panel(r / panel_width);
    const size_t lane = static_cast<size_t>(r % panel_width);
    const float scale = scales_[static_cast<size_t>(r)];
    for (size_t k = 0; k < static_cast<size_t>(cols_); ++k)
      out[k] = static_cast<float>(panel[(k / 4) * 64 + lane * 4 + k % 4]) * scale;
    return;
  }
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

// Writing NumPy .npy files (version 1.0, little-endian float32, C order).
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade {

/// Writes `data` as a float32 array of the given shape.
status write_npy_f32(const std::string& path, const std::vector<size_t>& shape, const float* data);

}  // namespace brigade

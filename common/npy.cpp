#include "common/npy.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace brigade {

status write_npy_f32(const std::string& path, const std::vector<size_t>& shape, const float* data) {
  std::string dims;
  size_t count = 1;
  for (size_t d : shape) {
    dims += std::to_string(d) + ", ";
    count *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3, 4)" but "(3,)" for one dimension
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + newline must be a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0)
    header.push_back(' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return error(errc::io_error, path + ": cannot create: " + std::strerror(errno));
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, sizeof magic);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(count * sizeof(float)));
  out.close();
  if (!out) return error(errc::io_error, path + ": write failed");
  return ok_status();
}

}  // namespace brigade

// Reading and writing the safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw data.
//
// The reader maps the file and validates everything before handing out a view: header length
// (capped), JSON well-formedness, known dtypes, shape x dtype size == byte range, ranges inside the
// data section, no two tensors overlapping. A bad file yields an error naming the file and tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

/// Element types a safetensors header may declare.
enum class st_dtype { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean, f8_e4m3, f8_e5m2 };

size_t st_dtype_size(st_dtype t);
const char* st_dtype_name(st_dtype t);

/// One tensor inside a mapped file.
struct tensor_view {
  std::string name;
  st_dtype type = st_dtype::f32;
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;  ///< Not necessarily aligned: read with memcpy.
  size_t bytes = 0;
  std::string file;  ///< The file it lives in, for error messages.

  int64_t elements() const;
};

/// Largest header brigade accepts; real checkpoints use a few hundred kilobytes.
constexpr uint64_t max_header_bytes = 100u * 1024u * 1024u;

/// A read-only mapping of one .safetensors file.
class safetensors_file {
 public:
  static result<std::unique_ptr<safetensors_file>> open(const std::string& path);
  ~safetensors_file();
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, tensor_view>& tensors() const { return tensors_; }
  const tensor_view* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  safetensors_file() = default;
  status parse_header(const unsigned char* base, size_t size);

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, tensor_view> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: name, dtype, shape and its raw little-endian bytes.
struct tensor_to_write {
  std::string name;
  st_dtype type = st_dtype::f32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

/// Writes a safetensors file (tensors sorted by name, data 8-byte aligned).
status write_safetensors(const std::string& path, const std::vector<tensor_to_write>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace brigade::model

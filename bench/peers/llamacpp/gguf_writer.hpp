// A writer for GGUF version 3, the file format llama.cpp loads: a header, typed key-value
// metadata, a table of tensors (name, dimensions, element type, offset), then the tensor data,
// each tensor starting on an `alignment`-byte boundary of the data section.
//
// Only what brigade's peer benchmark writes is here: scalar, string and array metadata, and
// tensors of f32, f16 and bf16 elements given as raw little-endian bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::bench::llamacpp {

/// GGUF metadata value types (the numbering of the GGUF specification).
enum class gguf_value : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// ggml element types a tensor may have here (ggml's numbering).
enum class ggml_type : uint32_t { f32 = 0, f16 = 1, bf16 = 30 };

size_t ggml_type_bytes(ggml_type t);

constexpr uint32_t gguf_version = 3;
constexpr uint32_t gguf_alignment = 32;

class gguf_writer {
 public:
  void add_u32(const std::string& key, uint32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_i32s(const std::string& key, const std::vector<int32_t>& v);

  /// A tensor with `dims` in ggml's order, innermost (contiguous) first: a row-major [rows, cols]
  /// matrix is {cols, rows}. `bytes` must hold exactly the product of dims elements of `type`.
  status add_tensor(const std::string& name, ggml_type type, std::vector<uint64_t> dims,
                    std::vector<unsigned char> bytes);

  /// Writes the file; the metadata always includes general.alignment.
  status write(const std::string& path) const;

  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct tensor {
    std::string name;
    ggml_type type;
    std::vector<uint64_t> dims;
    std::vector<unsigned char> bytes;
  };
  void key(const std::string& k, gguf_value type);

  std::vector<unsigned char> metadata_;  // the serialised key-value pairs, in order
  uint64_t metadata_count_ = 0;
  std::vector<tensor> tensors_;
};

}  // namespace brigade::bench::llamacpp

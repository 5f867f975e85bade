// A Hugging Face checkpoint directory: one model.safetensors, or shards listed by
// model.safetensors.index.json. Tensors are looked up by their exact Hugging Face names.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/safetensors.hpp"

namespace brigade::model {

class checkpoint {
 public:
  static result<std::unique_ptr<checkpoint>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  /// The tensor called `name`, or an error naming it and the checkpoint.
  result<const tensor_view*> find(const std::string& name) const;
  /// A 2-D float tensor of exactly [rows, cols], as a host matrix for the backend.
  result<gpu::host_matrix> matrix(const std::string& name, int rows, int cols) const;
  /// A 1-D float tensor of exactly `count` elements (or [1, count]), widened to float32.
  result<std::vector<float>> vector(const std::string& name, int count) const;
  /// Total bytes of all tensors, for progress reports.
  size_t total_bytes() const;
  /// The dtype most tensors use, for reports ("bfloat16").
  std::string main_dtype() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<safetensors_file>> files_;
  std::unordered_map<std::string, const tensor_view*> index_;
};

}  // namespace brigade::model

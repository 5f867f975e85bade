#include "model/checkpoint.hpp"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace brigade::model {
namespace {

using json = nlohmann::json;

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

result<gpu::dtype> float_dtype(const tensor_view& t) {
  switch (t.type) {
    case st_dtype::f32:
      return gpu::dtype::f32;
    case st_dtype::bf16:
      return gpu::dtype::bf16;
    case st_dtype::f16:
      return gpu::dtype::f16;
    default:
      return error(errc::unsupported, t.file + ": tensor '" + t.name + "' has dtype " +
                                          st_dtype_name(t.type) +
                                          "; brigade reads float32, bfloat16 and float16");
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Reads the weight_map of a sharded checkpoint: tensor name -> shard file name.
result<std::map<std::string, std::string>> read_index(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(errc::io_error, path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return error(errc::bad_format, path + ": not a JSON object");
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) {
    return error(errc::bad_format, path + ": field 'weight_map' is missing or not an object");
  }
  std::map<std::string, std::string> out;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it->is_string()) {
      return error(errc::bad_format,
                   path + ": weight_map entry '" + it.key() + "' is not a string");
    }
    const std::string file = it->get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return error(errc::bad_format,
                   path + ": weight_map entry '" + it.key() + "' names a bad file '" + file + "'");
    }
    out[it.key()] = file;
  }
  return out;
}

}  // namespace

result<std::unique_ptr<checkpoint>> checkpoint::open(const std::string& dir) {
  std::unique_ptr<checkpoint> ck(new checkpoint());
  ck->dir_ = dir;
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  if (file_exists(index_path)) {
    auto weight_map = read_index(index_path);
    if (!weight_map) return weight_map.err();
    std::map<std::string, safetensors_file*> opened;
    for (const auto& [name, file] : *weight_map) {
      if (!opened.count(file)) {
        auto f = safetensors_file::open(dir + "/" + file);
        if (!f) return f.err();
        opened[file] = f->get();
        ck->files_.push_back(std::move(f.value()));
      }
      const tensor_view* t = opened[file]->find(name);
      if (!t) {
        return error(errc::bad_format, index_path + ": tensor '" + name + "' is listed in " + file +
                                           " but that file does not contain it");
      }
      ck->index_[name] = t;
    }
  } else if (file_exists(single_path)) {
    auto f = safetensors_file::open(single_path);
    if (!f) return f.err();
    for (const auto& [name, view] : f.value()->tensors())
      ck->index_[name] = &view;
    ck->files_.push_back(std::move(f.value()));
  } else {
    return error(errc::not_found, dir + ": no model.safetensors or model.safetensors.index.json");
  }
  return ck;
}

result<const tensor_view*> checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return error(errc::not_found, dir_ + ": tensor '" + name + "' is missing from the checkpoint");
  }
  return it->second;
}

result<gpu::host_matrix> checkpoint::matrix(const std::string& name, int rows, int cols) const {
  auto t = find(name);
  if (!t) return t.err();
  const tensor_view& v = *t.value();
  if (v.shape.size() != 2 || v.shape[0] != rows || v.shape[1] != cols) {
    return error(errc::bad_format, v.file + ": tensor '" + name + "' has shape " +
                                       shape_text(v.shape) + ", expected [" + std::to_string(rows) +
                                       ", " + std::to_string(cols) + "]");
  }
  auto type = float_dtype(v);
  if (!type) return type.err();
  return gpu::host_matrix{v.data, type.value(), rows, cols};
}

result<std::vector<float>> checkpoint::vector(const std::string& name, int count) const {
  auto t = find(name);
  if (!t) return t.err();
  const tensor_view& v = *t.value();
  const bool flat = v.shape.size() == 1 && v.shape[0] == count;
  const bool row = v.shape.size() == 2 && v.shape[0] == 1 && v.shape[1] == count;
  if (!flat && !row) {
    return error(errc::bad_format, v.file + ": tensor '" + name + "' has shape " +
                                       shape_text(v.shape) + ", expected [" +
                                       std::to_string(count) + "]");
  }
  auto type = float_dtype(v);
  if (!type) return type.err();
  std::vector<float> out(static_cast<size_t>(count));
  gpu::to_f32(type.value(), v.data, out.data(), out.size());
  return out;
}

size_t checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, view] : index_)
    total += view->bytes;
  return total;
}

std::string checkpoint::main_dtype() const {
  std::map<std::string, size_t> bytes_by_type;
  for (const auto& [name, view] : index_)
    bytes_by_type[st_dtype_name(view->type)] += view->bytes;
  std::string best;
  size_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) most = bytes, best = type;
  }
  return best;
}

}  // namespace brigade::model

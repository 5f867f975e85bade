#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace brigade::model {
namespace {

using json = nlohmann::json;

struct dtype_entry {
  const char* name;
  st_dtype type;
  size_t size;
};

constexpr dtype_entry dtype_table[] = {
    {"F64", st_dtype::f64, 8},         {"F32", st_dtype::f32, 4},
    {"F16", st_dtype::f16, 2},         {"BF16", st_dtype::bf16, 2},
    {"I64", st_dtype::i64, 8},         {"I32", st_dtype::i32, 4},
    {"I16", st_dtype::i16, 2},         {"I8", st_dtype::i8, 1},
    {"U8", st_dtype::u8, 1},           {"BOOL", st_dtype::boolean, 1},
    {"F8_E4M3", st_dtype::f8_e4m3, 1}, {"F8_E5M2", st_dtype::f8_e5m2, 1},
};

error bad(const std::string& path, const std::string& what) {
  return error(errc::bad_format, path + ": " + what);
}

error bad_tensor(const std::string& path, const std::string& name, const std::string& what) {
  return error(errc::bad_format, path + ": tensor '" + name + "': " + what);
}

// Reads one tensor entry of the header into `out`, checking everything but overlaps.
status parse_entry(const std::string& path, const std::string& name, const json& entry,
                   const unsigned char* data, size_t data_bytes, tensor_view& out) {
  if (!entry.is_object()) return bad_tensor(path, name, "header entry is not an object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return bad_tensor(path, name, "missing or non-string \"dtype\"");
  }
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return bad_tensor(path, name, "missing or non-array \"shape\"");
  }
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return bad_tensor(path, name, "\"data_offsets\" must be an array [begin, end]");
  }
  const std::string dtype = dtype_it->get<std::string>();
  const dtype_entry* known = nullptr;
  for (const auto& d : dtype_table) {
    if (dtype == d.name) known = &d;
  }
  if (!known) return bad_tensor(path, name, "unknown dtype \"" + dtype + "\"");
  out.name = name;
  out.type = known->type;
  out.file = path;
  uint64_t elements = 1;
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_unsigned()) {
      return bad_tensor(path, name, "shape has a dimension that is not a non-negative integer");
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / d) {
      return bad_tensor(path, name, "shape overflows");
    }
    elements *= d;
    out.shape.push_back(static_cast<int64_t>(d));
  }
  const json& b = (*offsets_it)[0];
  const json& e = (*offsets_it)[1];
  if (!b.is_number_unsigned() || !e.is_number_unsigned()) {
    return bad_tensor(path, name, "data_offsets are not non-negative integers");
  }
  const uint64_t begin = b.get<uint64_t>();
  const uint64_t end = e.get<uint64_t>();
  if (begin > end) return bad_tensor(path, name, "data_offsets begin after they end");
  if (end > data_bytes) {
    return bad_tensor(path, name,
                      "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") run past the end of the data (" + std::to_string(data_bytes) +
                          " bytes): the file is truncated or the header is wrong");
  }
  if (elements > std::numeric_limits<uint64_t>::max() / known->size ||
      elements * known->size != end - begin) {
    return bad_tensor(path, name,
                      "shape needs " + std::to_string(elements) + " x " +
                          std::to_string(known->size) + " bytes but data_offsets span " +
                          std::to_string(end - begin));
  }
  out.data = data + begin;
  out.bytes = static_cast<size_t>(end - begin);
  return ok_status();
}

}  // namespace

size_t st_dtype_size(st_dtype t) {
  for (const auto& d : dtype_table) {
    if (d.type == t) return d.size;
  }
  return 0;
}

const char* st_dtype_name(st_dtype t) {
  for (const auto& d : dtype_table) {
    if (d.type == t) return d.name;
  }
  return "?";
}

int64_t tensor_view::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

result<std::unique_ptr<safetensors_file>> safetensors_file::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return error(errno == ENOENT ? errc::not_found : errc::io_error,
                 path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return error(errc::io_error, path + ": cannot stat: " + std::strerror(err));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  std::unique_ptr<safetensors_file> file(new safetensors_file());
  file->path_ = path;
  if (size > 0) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return error(errc::io_error, path + ": cannot map: " + std::strerror(err));
    }
    file->map_ = map;
    file->map_bytes_ = size;
  }
  ::close(fd);
  status parsed = file->parse_header(static_cast<const unsigned char*>(file->map_), size);
  if (!parsed) return parsed.err();
  return file;
}

safetensors_file::~safetensors_file() {
  if (map_) ::munmap(map_, map_bytes_);
}

status safetensors_file::parse_header(const unsigned char* base, size_t size) {
  if (size < 8) {
    return bad(path_, "file is " + std::to_string(size) +
                          " bytes, shorter than the 8-byte header length: truncated");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | base[i];
  if (header_len > max_header_bytes) {
    return bad(path_, "header length " + std::to_string(header_len) + " exceeds the " +
                          std::to_string(max_header_bytes) + "-byte limit");
  }
  if (header_len > size - 8) {
    return bad(path_, "header length " + std::to_string(header_len) + " runs past the end of the " +
                          std::to_string(size) + "-byte file: truncated");
  }
  const char* text = reinterpret_cast<const char*>(base + 8);
  json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad(path_, "header is not valid JSON");
  if (!header.is_object()) return bad(path_, "header is not a JSON object");
  const unsigned char* data = base + 8 + header_len;
  const size_t data_bytes = size - 8 - static_cast<size_t>(header_len);
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad(path_, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return bad(path_, "__metadata__ value '" + m.key() + "' is not a string");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    tensor_view view;
    status entry = parse_entry(path_, it.key(), *it, data, data_bytes, view);
    if (!entry) return entry;
    tensors_.emplace(it.key(), std::move(view));
  }
  // Overlap check: sort the byte ranges and compare neighbours.
  std::vector<const tensor_view*> by_offset;
  for (const auto& [name, view] : tensors_) {
    if (view.bytes > 0) by_offset.push_back(&view);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const tensor_view* a, const tensor_view* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->data + by_offset[i - 1]->bytes > by_offset[i]->data) {
      return bad(path_, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                            "' overlap in the data section");
    }
  }
  return ok_status();
}

const tensor_view* safetensors_file::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

status write_safetensors(const std::string& path, const std::vector<tensor_to_write>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<const tensor_to_write*> sorted;
  for (const auto& t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const tensor_to_write* a, const tensor_to_write* b) { return a->name < b->name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* t : sorted) {
    header[t->name] = {{"dtype", st_dtype_name(t->type)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  while ((text.size() + 8) % 8 != 0)
    text.push_back(' ');
  // Write beside the target and rename, so a failed write never leaves a half file behind.
  const std::string tmp = path + ".partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return error(errc::io_error, tmp + ": cannot create: " + std::strerror(errno));
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto* t : sorted) {
    out.write(reinterpret_cast<const char*>(t->bytes.data()),
              static_cast<std::streamsize>(t->bytes.size()));
  }
  out.close();
  if (!out) {
    std::remove(tmp.c_str());
    return error(errc::io_error, path + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return error(errc::io_error, path + ": cannot rename into place: " + std::strerror(errno));
  }
  return ok_status();
}

}  // namespace brigade::model

#include "bench/peers/llamacpp/gguf_writer.hpp"

#include <cstring>
#include <fstream>

namespace brigade::bench::llamacpp {
namespace {

// GGUF is little-endian, and so is every machine brigade builds for (x86-64).
template <class T>
void put(std::vector<unsigned char>& out, T v) {
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  out.insert(out.end(), raw, raw + sizeof(T));
}

void put_string(std::vector<unsigned char>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t round_up(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

size_t ggml_type_bytes(ggml_type t) {
  return t == ggml_type::f32 ? 4 : 2;
}

void gguf_writer::key(const std::string& k, gguf_value type) {
  put_string(metadata_, k);
  put<uint32_t>(metadata_, static_cast<uint32_t>(type));
  ++metadata_count_;
}

void gguf_writer::add_u32(const std::string& k, uint32_t v) {
  key(k, gguf_value::u32);
  put(metadata_, v);
}

void gguf_writer::add_f32(const std::string& k, float v) {
  key(k, gguf_value::f32);
  put(metadata_, v);
}

void gguf_writer::add_bool(const std::string& k, bool v) {
  key(k, gguf_value::boolean);
  put<uint8_t>(metadata_, v ? 1 : 0);
}

void gguf_writer::add_string(const std::string& k, const std::string& v) {
  key(k, gguf_value::string);
  put_string(metadata_, v);
}

void gguf_writer::add_strings(const std::string& k, const std::vector<std::string>& v) {
  key(k, gguf_value::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(gguf_value::string));
  put<uint64_t>(metadata_, v.size());
  for (const std::string& s : v)
    put_string(metadata_, s);
}

void gguf_writer::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
  key(k, gguf_value::array);
  put<uint32_t>(metadata_, static_cast<uint32_t>(gguf_value::i32));
  put<uint64_t>(metadata_, v.size());
  for (int32_t x : v)
    put(metadata_, x);
}

status gguf_writer::add_tensor(const std::string& name, ggml_type type, std::vector<uint64_t> dims,
                               std::vector<unsigned char> bytes) {
  uint64_t elements = 1;
  for (uint64_t d : dims)
    elements *= d;
  if (dims.empty() || dims.size() > 4 || elements * ggml_type_bytes(type) != bytes.size()) {
    return error(errc::invalid_argument,
                 "GGUF tensor " + name + ": " + std::to_string(bytes.size()) +
                     " bytes do not match its " + std::to_string(dims.size()) + " dimensions");
  }
  tensors_.push_back({name, type, std::move(dims), std::move(bytes)});
  return ok_status();
}

status gguf_writer::write(const std::string& path) const {
  std::vector<unsigned char> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, gguf_version);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, metadata_count_ + 1);
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  put_string(head, "general.alignment");
  put<uint32_t>(head, static_cast<uint32_t>(gguf_value::u32));
  put<uint32_t>(head, gguf_alignment);
  uint64_t offset = 0;
  for (const tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims)
      put<uint64_t>(head, d);
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset = round_up(offset + t.bytes.size(), gguf_alignment);
  }
  head.resize(round_up(head.size(), gguf_alignment), 0);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return error(errc::io_error, path + ": cannot open it for writing");
  out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  const char zeros[gguf_alignment] = {};
  for (const tensor& t : tensors_) {
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
    const uint64_t pad = round_up(t.bytes.size(), gguf_alignment) - t.bytes.size();
    out.write(zeros, static_cast<std::streamsize>(pad));
  }
  out.flush();
  if (!out) return error(errc::io_error, path + ": write failed");
  return ok_status();
}

}  // namespace brigade::bench::llamacpp

#include "kvcache/model_fingerprint.hpp"

#include <xxhash.h>

namespace brigade::kvcache {

namespace {

bool printable(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

const char* to_string(kv_dtype dtype) {
  switch (dtype) {
    case kv_dtype::f32:
      return "f32";
    case kv_dtype::f16:
      return "f16";
    case kv_dtype::bf16:
      return "bf16";
  }
  return "unknown";
}

std::size_t dtype_bytes(kv_dtype dtype) {
  return dtype == kv_dtype::f32 ? 4 : 2;
}

result<model_fingerprint> model_fingerprint::make(std::string_view model_id,
                                                  const kv_block_shape& shape,
                                                  std::string_view numerics) {
  if (model_id.empty() || model_id.size() > max_model_id_chars || !printable(model_id)) {
    return error(errc::invalid_argument,
                 "KV cache model id '" + std::string(model_id.substr(0, 64)) +
                     "' is invalid: use 1 to 256 printable characters (the model directory or "
                     "a hash of its configuration)");
  }
  if (shape.layers <= 0 || shape.block_tokens <= 0 || shape.kv_heads <= 0 || shape.head_dim <= 0) {
    return error(errc::invalid_argument,
                 "KV block shape of model '" + std::string(model_id) +
                     "' must have positive layers, block_tokens, kv_heads and head_dim, got " +
                     std::to_string(shape.layers) + ", " + std::to_string(shape.block_tokens) +
                     ", " + std::to_string(shape.kv_heads) + ", " + std::to_string(shape.head_dim));
  }
  if (numerics.empty() || numerics.size() > 32 || !printable(numerics) ||
      numerics.find(' ') != std::string_view::npos) {
    return error(errc::invalid_argument, "KV block numerics '" +
                                             std::string(numerics.substr(0, 40)) +
                                             "' is invalid: expected a class name such as "
                                             "f32 or bf16-dot");
  }
  auto s = std::make_shared<state>();
  s->shape = shape;
  s->text = "model=" + std::string(model_id) + " layers=" + std::to_string(shape.layers) +
            " block_tokens=" + std::to_string(shape.block_tokens) +
            " kv_heads=" + std::to_string(shape.kv_heads) +
            " head_dim=" + std::to_string(shape.head_dim) + " dtype=" + to_string(shape.dtype) +
            (shape.values_alias_keys ? " rows=once" : "") +
            (numerics == "f32" ? std::string() : " numerics=" + std::string(numerics));
  s->digest = XXH3_64bits(s->text.data(), s->text.size());
  return model_fingerprint(std::move(s));
}

std::size_t model_fingerprint::half_bytes() const {
  const kv_block_shape& s = shape();
  return static_cast<std::size_t>(s.block_tokens) * static_cast<std::size_t>(s.kv_heads) *
         static_cast<std::size_t>(s.head_dim) * dtype_bytes(s.dtype);
}

}  // namespace brigade::kvcache

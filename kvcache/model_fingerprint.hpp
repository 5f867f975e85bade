// The identity of a model's KV layout: which blocks a cache may serve to which model.
//
// A cached block is only meaningful to the model (weights and configuration), block size and
// element type that computed it. Every tier keys its blocks by this fingerprint's digest as well
// as by the block's chain hash, and the SSD tier stores the full text in each block file and
// compares it on every read, so that a store never serves one model's KV to another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace brigade::kvcache {

/// The element type of cached keys and values.
enum class kv_dtype : std::uint8_t { f32, f16, bf16 };

/// Where each layer's keys and values sit in a block's bytes.
struct kv_block_shape {
  int layers = 0;
  int block_tokens = 0;
  int kv_heads = 0;
  int head_dim = 0;
  kv_dtype dtype = kv_dtype::f32;
  /// One row per token serves as key and value (MLA): a block holds each layer's keys only.
  bool values_alias_keys = false;

  int planes() const { return values_alias_keys ? 1 : 2; }
};

class model_fingerprint {
 public:
  /// The most characters of a model id.
  static constexpr std::size_t max_model_id_chars = 256;

  /// The fingerprint of `model_id` (the checkpoint's content id, "content:<hex>", which hashes
  /// its configuration, tokenizer and weights; 1 to 256 printable characters) with blocks of
  /// `shape`; every dimension positive. `numerics` is the kernel numerics class that computes
  /// the blocks ("f32", "bf16-dot": gpu/cpu/kernel_path.hpp): KV from another class would change
  /// a sequence's results, so blocks are never served across classes.
  static result<model_fingerprint> make(std::string_view model_id, const kv_block_shape& shape,
                                        std::string_view numerics = "f32");

  /// "model=<id> layers=16 block_tokens=16 kv_heads=8 head_dim=64 dtype=f32" (with " rows=once"
  /// when values alias keys, " numerics=<class>" when not f32): what block files store and
  /// compare.
  const std::string& text() const { return state_->text; }
  /// XXH3 of text(): the key tiers index blocks by.
  std::uint64_t digest() const { return state_->digest; }
  const kv_block_shape& shape() const { return state_->shape; }

  /// The bytes of one block: every layer's keys then values (keys only when values alias keys).
  std::size_t block_bytes() const {
    return static_cast<std::size_t>(shape().planes()) * static_cast<std::size_t>(shape().layers) *
           half_bytes();
  }
  /// The bytes of one layer's keys (or values): [block_tokens, kv_heads * head_dim].
  std::size_t half_bytes() const;
  /// Where layer `layer`'s keys start in a block; its values follow them (or are them).
  std::size_t keys_offset(int layer) const {
    return static_cast<std::size_t>(shape().planes()) * static_cast<std::size_t>(layer) *
           half_bytes();
  }
  std::size_t values_offset(int layer) const {
    return keys_offset(layer) + (shape().values_alias_keys ? 0 : half_bytes());
  }

  friend bool operator==(const model_fingerprint& a, const model_fingerprint& b) {
    return a.state_ == b.state_ || a.text() == b.text();
  }
  friend bool operator!=(const model_fingerprint& a, const model_fingerprint& b) {
    return !(a == b);
  }

 private:
  struct state {
    std::string text;
    std::uint64_t digest = 0;
    kv_block_shape shape;
  };
  explicit model_fingerprint(std::shared_ptr<const state> s) : state_(std::move(s)) {}

  /// Shared and immutable: fingerprints are copied into every block at no cost.
  std::shared_ptr<const state> state_;
};

/// "f32", "f16" or "bf16".
const char* to_string(kv_dtype dtype);
std::size_t dtype_bytes(kv_dtype dtype);

}  // namespace brigade::kvcache

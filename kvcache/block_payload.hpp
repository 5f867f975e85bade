// The bytes of one cached KV block, as the host and SSD tiers hold them.
//
// A block covers block_tokens tokens of every layer: for layer 0, 1, ... its keys then its values,
// each [block_tokens, kv_heads * head_dim] elements of the model's dtype (the layout
// gpu::backend::read_kv_block copies out, one layer at a time); only the keys when the model's
// values alias its keys (MLA). A payload is immutable once made
// and shared by pointer: a reader that fetched one keeps it valid while a tier evicts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/model_fingerprint.hpp"

namespace brigade::kvcache {

/// A block's name in every tier: the model that computed it and its chain hash.
struct block_key {
  /// model_fingerprint::digest() of the block's model.
  std::uint64_t model = 0;
  block_hash hash;

  friend bool operator==(const block_key& a, const block_key& b) {
    return a.model == b.model && a.hash == b.hash;
  }
  friend bool operator!=(const block_key& a, const block_key& b) { return !(a == b); }
};

struct block_key_hasher {
  std::size_t operator()(const block_key& k) const {
    return static_cast<std::size_t>(k.hash.lo ^ (k.model * 0x9E3779B97F4A7C15ULL));
  }
};

class block_payload {
 public:
  /// A block of `model` named `hash`; `bytes` must be exactly model.block_bytes() long.
  static result<std::shared_ptr<const block_payload>> make(model_fingerprint model, block_hash hash,
                                                           std::vector<std::uint8_t> bytes);

  const model_fingerprint& model() const { return model_; }
  block_hash hash() const { return hash_; }
  block_key key() const { return {model_.digest(), hash_}; }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }
  std::size_t size_bytes() const { return bytes_.size(); }

  /// Layer `layer`'s keys and values, model().half_bytes() each.
  const std::uint8_t* keys(int layer) const { return bytes_.data() + model_.keys_offset(layer); }
  const std::uint8_t* values(int layer) const {
    return bytes_.data() + model_.values_offset(layer);
  }

 private:
  block_payload(model_fingerprint model, block_hash hash, std::vector<std::uint8_t> bytes)
      : model_(std::move(model)), hash_(hash), bytes_(std::move(bytes)) {}

  model_fingerprint model_;
  block_hash hash_;
  std::vector<std::uint8_t> bytes_;
};

using payload_ptr = std::shared_ptr<const block_payload>;

}  // namespace brigade::kvcache

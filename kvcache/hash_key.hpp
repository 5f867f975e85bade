// Where a deployment's block-hash key comes from (kvcache/block_hash.hpp says why there is one).
//
//   nodes in the manifest   derived from the join secret on every side (cluster/join_secret.hpp):
//                           the coordinator and each node compute the same key, and it is never
//                           sent anywhere
//   an SSD tier             a key file in the SSD directory, made at first start: the cache and
//                           the key that named its blocks stay together across restarts
//   otherwise               a fresh random key per start: nothing cached outlives the process
#pragma once

#include <string>

#include "common/result.hpp"
#include "kvcache/block_hash.hpp"

namespace brigade::kvcache {

/// The key file's name inside an SSD tier's directory.
inline constexpr const char* hash_key_file_name = "block-hash.key";

/// 16 bytes from the kernel's random source.
hash_key_bytes random_hash_key();

/// The key in `dir`/block-hash.key (32 hex digits), made with a fresh random key (mode 0600,
/// written whole under a temporary name, then renamed) when the file does not exist. An
/// unreadable or malformed file is an error naming it: the cache under it cannot be trusted.
result<hash_key_bytes> load_or_create_hash_key(const std::string& dir);

}  // namespace brigade::kvcache

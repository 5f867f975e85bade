// The digests of weights files kept between starts, so that a restart need not read a whole
// checkpoint again: one small JSON file, keyed by what stat() says of each file.
//
//   {"version": 1, "files": {"/abs/model.safetensors": {"size": 123, "mtime_ns": 1700000000000,
//    "inode": 42, "xxh3_128": "<32 hex>", "checked_s": 1700000000}}}
//
// A key that matches says only that the file looks unchanged: content rewritten with its size,
// mtime and inode kept is not seen here (checkpoint_identity checks cached digests again).
// Several processes may share the file: a save merges this one's changes into what the file holds
// then and replaces it atomically; a race loses at most an entry, which costs a rehash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/result.hpp"

namespace brigade::model {

/// What a cached digest is valid for.
struct file_key {
  std::string path;  ///< Absolute, symbolic links resolved.
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t inode = 0;

  /// The key of the regular file at `path` now.
  static result<file_key> of(const std::string& path);

  friend bool operator==(const file_key& a, const file_key& b) {
    return a.path == b.path && a.size == b.size && a.mtime_ns == b.mtime_ns && a.inode == b.inode;
  }
  friend bool operator!=(const file_key& a, const file_key& b) { return !(a == b); }
};

class weights_digest_cache {
 public:
  /// Entries kept at most: the most recently checked ones.
  static constexpr std::size_t max_entries = 1024;

  /// The cache file `file_name` in `dir`. An empty `dir` holds nothing and saves nowhere; a
  /// missing, unreadable or malformed file reads as empty.
  static weights_digest_cache load(std::string dir, std::string file_name);

  /// The digest stored for exactly this key.
  std::optional<std::string> find(const file_key& key) const;
  /// Records `digest_hex` for `key`, checked at `checked_s` (Unix seconds).
  void put(const file_key& key, const std::string& digest_hex, std::int64_t checked_s);
  /// Forgets the file at `path`.
  void erase(const std::string& path);
  /// Whether put or erase changed anything since the load.
  bool changed() const { return !changes_.empty(); }
  /// Writes the changes (merged into what the file holds now) with a temporary file and a
  /// rename, creating `dir` if needed; an error says why nothing was written.
  status save() const;

 private:
  struct entry {
    file_key key;
    std::string digest_hex;
    std::int64_t checked_s = 0;
  };
  using entry_map = std::map<std::string, entry>;

  static entry_map read(const std::string& path);

  std::string dir_;
  std::string file_name_;
  entry_map entries_;
  /// By path: the new entry, or nothing for an erase.
  std::map<std::string, std::optional<entry>> changes_;
};

}  // namespace brigade::model

// The identity of a checkpoint's content: the model id the prefix KV cache names blocks by, so
// that KV computed with one set of weights is never served for another, even when new weights
// replace the old ones under the same path.
//
// The id is an XXH3-128 digest over, in a fixed order, the name, size and XXH3-128 digest of
// each file the loader reads: config.json, tokenizer.json, tokenizer_config.json (an absent one
// counts as absent), then model.safetensors, or model.safetensors.index.json and the shards it
// names. The directory's path is not part of it: a checkpoint copied elsewhere keeps its cache.
//
// Weights files are large, so their digests are kept in a small JSON digest cache keyed by
// (absolute path, size, mtime in ns, inode): a restart hashes only the files whose key changed
// (and those modified less than 2 s before they were hashed: mtimes are as coarse as a tick).
// A digest taken from the cache is hashed again on a background thread, which logs an error and
// updates the cache when the content changed under an unchanged key (that process keeps the old
// id; the next start gets the new one). The cache location may be missing or read-only: that
// only costs a rehash at the next start.
//
//   compute: list files -> hash config and tokenizer -> weights: cached key ? cached digest
//            : hash the file -> save the digest cache -> id known
//   background (only with cached digests): running -> matched | changed | failed
//            the destructor stops it between two chunks (stopped) and joins it
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.hpp"
#include "model/weights_digest_cache.hpp"

namespace brigade::model {

/// A weights file's digest as the digest cache had it.
struct cached_weights_digest {
  file_key key;
  std::string digest_hex;
};

/// How the background check of digests taken from the cache went.
enum class digest_check : std::uint8_t {
  none,     ///< No digest came from the cache (or checking was off): nothing to check.
  running,  ///< Not over yet.
  matched,  ///< Every cached digest is the file's.
  changed,  ///< A file's content differs from its cached digest (logged as an error).
  failed,   ///< A file could not be read (logged as a warning).
  stopped,  ///< The identity was destroyed before the check ended.
};

const char* to_string(digest_check c);

class checkpoint_identity {
 public:
  struct options {
    /// Where the digest cache file lives; empty: default_cache_dir(), and no cache when that is
    /// empty too.
    std::string cache_dir;
    /// Hash the weights files whose digest came from the cache again, in the background.
    bool check_cached = true;
    /// A progress bar on stderr when at least this many bytes must be hashed before the id.
    std::uint64_t progress_min_bytes = std::uint64_t{1} << 30;
  };

  /// The identity of the checkpoint in `dir`; fails when a file the loader needs is missing or
  /// unreadable, or the shard index is malformed.
  static result<std::unique_ptr<checkpoint_identity>> compute(const std::string& dir,
                                                              const options& opts);
  /// The identity of `dir` as `owner` (the model loaded from it) has it: computed with default
  /// options at its first call, then the same for as long as `owner` lives, so that the id keeps
  /// naming the weights that were loaded even if the files change meanwhile. Kept (its
  /// background check too) until another owner asks for `dir` or the process exits.
  static result<std::shared_ptr<const checkpoint_identity>> shared(
      const std::string& dir, const std::shared_ptr<const void>& owner);
  /// $BRIGADE_CACHE_DIR, else $XDG_CACHE_HOME/brigade, else $HOME/.cache/brigade; empty when
  /// none of them is set.
  static std::string default_cache_dir();
  /// The digest cache's file name inside its directory.
  static constexpr const char* cache_file_name = "checkpoint-digests.json";

  ~checkpoint_identity();
  checkpoint_identity(const checkpoint_identity&) = delete;
  checkpoint_identity& operator=(const checkpoint_identity&) = delete;

  /// "content:<32 lower-case hex digits>", a model id for kvcache::model_fingerprint.
  const std::string& id() const { return id_; }
  /// Bytes read to compute id(): config, tokenizer and index files, and every weights file whose
  /// digest was not in the cache.
  std::uint64_t bytes_hashed_at_start() const { return bytes_hashed_at_start_; }
  /// Weights files whose digest came from the cache (and are checked in the background).
  int cached_files() const { return static_cast<int>(to_check_.size()); }
  /// Waits at most `timeout` for the background check; `running` when it is not over.
  digest_check wait_checked(std::chrono::milliseconds timeout) const;

 private:
  checkpoint_identity() = default;
  void check_in_background();
  void finish_check(digest_check outcome);

  std::string id_;
  std::uint64_t bytes_hashed_at_start_ = 0;
  std::string cache_dir_;
  std::vector<cached_weights_digest> to_check_;

  mutable std::mutex mutex_;
  mutable std::condition_variable checked_;
  digest_check check_ = digest_check::none;
  std::atomic<bool> stop_{false};
  std::thread checker_;
};

}  // namespace brigade::model

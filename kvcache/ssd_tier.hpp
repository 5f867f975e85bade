// The SSD tier of the KV cache: one file per block in a directory, under a byte budget, LRU.
//
// Layout: <dir>/LOCK (held with flock while a tier has the directory open), <dir>/IDENTITY (the
// file format, block-hash scheme and key id its blocks were named under), and each block in
// <dir>/<hh>/<model>-<hash>.<scenario>.kvb, where hh is the low byte of the block hash in hex
// (256 subdirectories keep directories small), model is 16 and hash 32 hex digits, and scenario
// is the block's retention scenario. A directory whose IDENTITY differs from the tier's (another
// deployment's key, an older scheme, or none) has every block file dropped at open, with a log
// line saying why: such blocks could never be hits, and are never half-used. The file's format is
// in kvcache/ssd_block_file.hpp; its modification time is the block's last use.
//
// The index is rebuilt on open from names and stat() alone, no file read: what a block needs to
// be found, ordered and expired (key, scenario, size, last use) is in its name and its metadata,
// and changing a block's scenario or last use is a rename or a time stamp, never a rewrite. A
// torn write (a temporary file left by a crash or a full disk) is deleted on open. A damaged or
// truncated block file is found when it is read: the length, header and checksum are checked
// before a byte is returned, and a bad block is deleted, counted, logged and reported as a miss,
// so that the caller recomputes it.
//
// Budget: the sum of the files' sizes rounded up to 4 KiB. Storing a block first evicts the least
// recently used ones until it fits. A full disk (ENOSPC, EDQUOT, EFBIG) fails the store with
// resource_exhausted and leaves no file behind.
//
// Threads: contains() and stats() only read the in-memory index and never wait on the disk. The
// operations that touch files (put, get, erase, expire) serialize on their own lock; the tiered
// store calls them from its one background thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/result.hpp"
#include "kvcache/tier_block.hpp"

namespace brigade::kvcache {

struct ssd_tier_config {
  /// An existing directory this process can write; the tier owns the files it names.
  std::string dir;
  /// The most bytes of block files the tier keeps.
  std::uint64_t budget_bytes = 0;
  /// Drop blocks from the page cache after writing and reading them: a block written was just
  /// evicted from host memory, and one read is about to be promoted there, so a page-cache copy
  /// would only duplicate the host tier.
  bool drop_page_cache = true;
  /// block_hasher::key_id() of the key that names the blocks; files under another are dropped.
  std::uint64_t key_id = 0;
};

/// What open() found in the directory.
struct ssd_open_report {
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;
  /// Temporary files of interrupted writes, deleted.
  std::uint64_t torn_writes = 0;
  /// Block files too short to hold a header, deleted.
  std::uint64_t corrupt_files = 0;
  /// Older copies of a block stored twice (a crash between writing and renaming), deleted.
  std::uint64_t duplicates = 0;
  /// Blocks expired or evicted for the budget while opening.
  std::uint64_t removed = 0;
  /// Block files of another hash scheme or key (another deployment's cache), deleted.
  std::uint64_t foreign = 0;
};

class ssd_tier {
 public:
  static constexpr const char* identity_file = "IDENTITY";

  /// Opens the tier on `config.dir` and indexes the blocks already there. Fails, naming the path
  /// and what to do, when the directory is missing, not a directory, not writable, or open by
  /// another tier. `clk` and `policy` must outlive the tier.
  static result<std::unique_ptr<ssd_tier>> open(const ssd_tier_config& config, const clock& clk,
                                                const retention& policy);
  ~ssd_tier();
  ssd_tier(const ssd_tier&) = delete;
  ssd_tier& operator=(const ssd_tier&) = delete;

  /// Stores `block` with its scenario and last use. A block already stored keeps its file: only
  /// its scenario (the longer retention) and last use (the later) change. Errors:
  /// resource_exhausted when the disk is full, invalid_argument for a block larger than the
  /// budget, io_error for other failures; nothing is stored then.
  status put(const tier_block& block);

  /// Reads block `hash` of `model`, used now under `scenario`. On a hit the payload has passed
  /// every check, and the result carries the block's scenario and last use; on a miss (absent,
  /// expired, damaged, unreadable) the payload is null.
  tier_block get(const model_fingerprint& model, const block_hash& hash, scenario_id scenario);

  /// Whether an unexpired block is indexed under `key`; reads no file.
  bool contains(const block_key& key) const;

  /// Deletes the block under `key`; returns whether there was one.
  bool erase(const block_key& key);

  /// Deletes every expired block; returns how many. O(blocks).
  std::size_t expire();

  tier_stats stats() const;
  const ssd_open_report& open_report() const { return open_report_; }
  const std::string& dir() const { return config_.dir; }

  /// The file that holds `key`, or "" when none does: for tests and the benchmark.
  std::string path_of(const block_key& key) const;

  /// Checks the index against itself and against the directory (every indexed file exists with
  /// its size and modification time); reads the directory, for tests.
  status check_invariants() const;

 private:
  struct entry {
    /// The scenario in the file name; may be one this process's retention table lacks.
    std::string scenario_name;
    scenario_id scenario = retention::chat;
    time_ns last_use_ns = 0;
    std::uint64_t alloc_bytes = 0;
  };
  struct key_less {
    bool operator()(const std::pair<time_ns, block_key>& a,
                    const std::pair<time_ns, block_key>& b) const;
  };
  using entry_map = std::unordered_map<block_key, entry, block_key_hasher>;

  ssd_tier(ssd_tier_config config, const clock& clk, const retention& policy, int lock_fd);

  /// The IDENTITY file's text for this tier's configuration.
  std::string identity_text() const;
  /// Drops every block file when IDENTITY is not this tier's, then writes it.
  status check_identity();
  status scan();
  void index_scanned(const std::string& subdir, const std::string& name);
  status refresh(const block_key& key, scenario_id scenario, time_ns last_use_ns);
  status write_new(const tier_block& block, std::uint64_t alloc_bytes);
  void drop_bad(const block_key& key, const error& why);
  std::string path_for(const block_key& key, const std::string& scenario_name) const;
  bool expired_locked(const entry& e, time_ns now) const;
  void insert_locked(const block_key& key, entry e);
  void erase_locked(entry_map::iterator it);
  void unlink_files(const std::vector<std::string>& paths);

  const ssd_tier_config config_;
  const clock& clock_;
  const retention& retention_;
  /// The flock'ed LOCK file: one tier per directory, across processes.
  int lock_fd_;
  ssd_open_report open_report_;

  /// Serializes the operations that touch files, so that no two race on one file.
  mutable std::mutex io_mutex_;
  /// Guards the index; held only for in-memory work, never across a system call on a block.
  mutable std::mutex index_mutex_;
  entry_map entries_;
  /// (last use, key), least recently used first.
  std::set<std::pair<time_ns, block_key>, key_less> lru_;
  tier_stats stats_;
};

}  // namespace brigade::kvcache

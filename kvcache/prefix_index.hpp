// One worker's index of cached KV blocks, keyed by chained block hash (kvcache/block_hash.hpp).
//
// The index knows nothing of where a block lives: each entry carries an opaque block id chosen by
// the owner (the engine's physical block, a host-tier slot, ...). Owners follow one protocol per
// request, and the index checks it:
//
//   n = match(chain)                  how many leading blocks are cached (no state change)
//   acquire(chain, n, scenario)       take a reference on blocks [0, n); they are now pinned
//   insert(chain, i, id, scenario)    for i = n, n+1, ...: cache a computed block, referenced
//   release(chain, m)                 when the request ends: drop its references on [0, m)
//
// Invariants (tests/kvcache/prefix_index_stress_test.cpp checks them under random interleavings):
// - A referenced entry is never evicted or expired: what a running step reads stays put.
// - References are prefix-closed: a referenced block's parent is referenced. insert() requires
//   the parent to be referenced, and release() refuses to unpin a block whose child is pinned.
// - Only leaves leave: an entry is removed only when no cached child depends on it, so every
//   cached block stays reachable by match(), which stops at the first miss.
//
// Eviction is a segmented LRU over unreferenced entries, where a block's use ends when its last
// reference is released. An entry counts its uses (the requests that acquired or inserted it).
// Released, it goes to the most recent end of one of two lists:
//
//   protected    entries used by four requests or more, at most 1/20 of the capacity; on
//                overflow its least recent entry moves to the most recent end of probation
//   probation    all other entries; eviction takes its least recent entry first, and takes from
//                protected only when probation is empty
//
// So a block many requests share survives a burst of blocks used fewer times, but only a small
// share of the cache is kept that way: on the Mooncake conversation trace (docs/kvcache.md) a
// block's chance of reuse depends mostly on its age, and larger protected shares or a lower use
// threshold lost hits. Below 20 blocks of capacity there is no protected segment and eviction
// is plain LRU.
//
// Both lists keep a parent behind its children, so their least recent entries are leaves and
// eviction is O(1): release() unpins a chain deepest block first; every use of a block is also a
// use of its parent (a child's count is capped at its parent's), so a parent is protected
// whenever its child is; and protected entries move to probation least recent first. A
// protected entry's children may sit in probation, which is evicted first.
//
// Expiry: a use at time t under scenario s extends the entry's expiry to t + retention(s), never
// shortening it (the longest retention wins). An entry never expires after its parent: a newly
// inserted block's expiry is capped at its parent's, and acquire() extends a whole prefix at
// once. expire() removes expired unreferenced entries deepest first, O(log n) amortized each.
// match() and acquire() treat an expired entry as absent even before expire() sweeps it.
//
// Not thread-safe: one worker (actor) owns its index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/clock.hpp"
#include "kvcache/retention.hpp"

namespace brigade::kvcache {

/// An entry the index gave up, by eviction or expiry: the owner frees `block_id` and publishes a
/// removal event for `hash`.
struct removed_block {
  block_hash hash;
  std::int64_t block_id = 0;
  /// The scenario whose retention the entry had, for a tier that keeps the block on.
  scenario_id scenario = retention::chat;
};

/// What insert() did: the block now cached under the hash, and whether it is the caller's.
struct insert_outcome {
  /// The cached block: the caller's new block, or an equal one cached before (then the caller
  /// frees its own copy and reads this one).
  std::int64_t block_id = 0;
  /// True when the caller's block was stored; false when an equal block was already cached.
  bool inserted = false;
};

/// A read-only copy of one entry, for introspection and tests.
struct entry_info {
  std::int64_t block_id = 0;
  std::int32_t refcount = 0;
  std::uint32_t children = 0;
  std::uint32_t depth = 0;
  scenario_id scenario = retention::chat;
  time_ns last_access_ns = 0;
  time_ns expiry_ns = 0;
  /// Requests that used the block, capped at its parent's count.
  std::uint32_t uses = 0;
  /// True while the entry is unreferenced in the protected segment.
  bool is_protected = false;
};

class prefix_index {
 public:
  /// An index holding at most `capacity_blocks` entries. `clk` and `policy` must outlive it.
  prefix_index(std::size_t capacity_blocks, const clock& clk, const retention& policy);
  ~prefix_index();
  prefix_index(const prefix_index&) = delete;
  prefix_index& operator=(const prefix_index&) = delete;

  /// The number of leading blocks of `chain` that are cached and unexpired.
  std::size_t match(const std::vector<block_hash>& chain) const;

  /// Pins blocks [0, count) of `chain` for a request of `scenario` and appends their block ids to
  /// `block_ids`. Fails, changing nothing, unless all of them are cached and unexpired.
  status acquire(const std::vector<block_hash>& chain, std::size_t count, scenario_id scenario,
                 std::vector<std::int64_t>& block_ids);

  /// Caches `chain[position]` as `block_id`, pinned for the caller, whose reference on
  /// chain[position - 1] must be held. At capacity it first evicts one unreferenced entry (in the
  /// eviction order above) into `removed`; when every entry is referenced it fails with
  /// resource_exhausted and the caller keeps the block private.
  result<insert_outcome> insert(const std::vector<block_hash>& chain, std::size_t position,
                                std::int64_t block_id, scenario_id scenario,
                                std::vector<removed_block>& removed);

  /// Drops one reference on each of blocks [0, count) of `chain`, deepest first. Fails, changing
  /// nothing, if one of them is not cached or not referenced, or if unpinning it would leave a
  /// pinned child under an unpinned parent (the caller released a prefix it does not hold).
  status release(const std::vector<block_hash>& chain, std::size_t count);

  /// Evicts up to `count` unreferenced entries, in the eviction order above, into `removed`, for
  /// an owner that needs physical blocks back; returns how many it evicted.
  std::size_t evict(std::size_t count, std::vector<removed_block>& removed);

  /// Removes every unreferenced entry whose expiry has passed into `removed`; returns how many.
  std::size_t expire(std::vector<removed_block>& removed);

  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_blocks_; }
  /// Entries with at least one reference: these cannot be evicted.
  std::size_t referenced() const { return entries_.size() - unreferenced_; }
  /// Entries eviction could remove right now.
  std::size_t evictable() const { return unreferenced_; }
  /// Unreferenced entries in the protected segment, and the most it may hold.
  std::size_t protected_size() const { return protected_.size; }
  std::size_t protected_capacity() const { return protected_capacity_; }

  /// The entry cached under `hash`, expired or not.
  std::optional<entry_info> find(block_hash hash) const;

  /// Walks every entry and checks the invariants above plus the internal bookkeeping; O(n), for
  /// tests and debugging. The error names the first broken invariant.
  status check_invariants() const;

 private:
  struct entry;
  /// A candidate in the expiry heap; stale once its entry is pinned, re-timed or gone.
  struct expiry_item {
    time_ns expiry_ns;
    std::uint32_t depth;
    block_hash hash;
  };
  /// An intrusive list of unreferenced entries, least recently used first.
  struct segment {
    entry* head = nullptr;
    entry* tail = nullptr;
    std::size_t size = 0;
    void push_back(entry& e);
    void erase(entry& e);
  };

  const entry* live_entry(block_hash hash, time_ns now) const;
  entry* find_entry(block_hash hash);
  void count_use(entry& e);
  void pin(entry& e);
  void unpin(entry& e);
  entry* victim() const;
  void push_expiry(const entry& e);
  void compact_expiry_heap();
  void remove(entry& e, std::vector<removed_block>& removed);
  status check_release(const std::vector<block_hash>& chain, std::size_t count);
  status check_entry(const entry& e) const;
  status check_expiry_heap() const;
  status check_segments() const;

  std::size_t capacity_blocks_;
  const clock& clock_;
  const retention& retention_;
  std::unordered_map<block_hash, entry> entries_;
  /// The bound on protected_.size: 1/20 of the capacity.
  std::size_t protected_capacity_;
  /// Every unreferenced entry is in exactly one of these.
  segment probation_;
  segment protected_;
  std::size_t unreferenced_ = 0;
  /// A min-heap of unreferenced entries by expiry, deepest first among equal expiries. Items go
  /// stale instead of being erased (an entry pinned or removed keeps its old item), so the heap
  /// is rebuilt from the segments whenever it reaches twice the unreferenced entries (plus a
  /// little): bounded, O(log n) amortized per operation, and no tree node per entry.
  std::vector<expiry_item> expiry_heap_;
  /// Entries of the chain being acquired or released, found once per call.
  std::vector<entry*> scratch_;
};

}  // namespace brigade::kvcache

// A prefill worker's prefix cache: a kvcache::prefix_index over the worker's KV block pool, so
// that a prompt whose first full blocks were computed before starts its prefill after them.
//
// One job's part, in order (the worker calls these between steps, never while one runs):
//
//   begin          hash the prompt's full blocks under the request's salt
//   take_pooled    pin the leading blocks the pool holds; they join the job's block table
//   [KV store]     the worker may fetch the next blocks from the node's KV store (host, SSD)
//   allocate       fresh blocks for the rest, evicting cached blocks in the index's order
//   adopt_fetched  write fetched blocks into fresh ones and cache them
//   cache_computed after each step: cache every block the job has filled
//   finish         unpin, give back the job's blocks; blocks the pool could not keep go to the
//                  KV store
//
// Reference counts (kvcache::block_pool): a block's count is one per job whose table holds it
// plus one while the index caches it. A step writes only positions at or after the job's first
// computed block, and a block is cached only once full, so a cached block is never written and a
// block in use is never freed; check_invariants() verifies exactly this equation.
//
// Only full blocks are cached, and a job always computes its last prompt token (its logits give
// the first output token), so at most (prompt tokens - 1) / block_tokens blocks are reused.
// Reused KV is bit for bit what recomputing would write: the CPU kernels are batch and chunk
// invariant.
//
// Evicted blocks are copied out for the KV store (take_demotions) when the worker has one;
// expired ones are dropped. Every change to the index is recorded for the router's global index
// (take_events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "actors/kv_block_codec.hpp"
#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "kvcache/block_hash.hpp"
#include "kvcache/block_pool.hpp"
#include "kvcache/prefix_index.hpp"

namespace brigade::actors {

/// One job's part in the cache.
struct job_prefix {
  /// Hashes of the prompt's full blocks, each block's parent before it.
  std::vector<kvcache::block_hash> chain;
  kvcache::scenario_id scenario = kvcache::retention::chat;
  /// Leading blocks the job may take from the cache.
  std::size_t reusable = 0;
  /// Leading chain blocks the job holds a reference on in the index.
  std::size_t held = 0;
  /// Blocks found in the pool, in the KV store's host tier and on its SSD.
  int pool_blocks = 0;
  int host_blocks = 0;
  int ssd_blocks = 0;
  /// False once the index refused a block (every entry in use): later blocks stay private.
  bool insertable = true;

  /// The first block the job computes: everything before it came from the cache.
  int first_computed() const { return pool_blocks + host_blocks + ssd_blocks; }
};

/// A block leaving the pool for the KV store: its hash, scenario and KV bytes (every layer's
/// keys then values, as kvcache::block_payload lays them out).
struct demoted_block {
  kvcache::block_hash hash;
  kvcache::scenario_id scenario = kvcache::retention::chat;
  std::vector<std::uint8_t> bytes;
};

/// What a job's block table looks like to the invariant checker.
struct job_blocks {
  const job_prefix* prefix = nullptr;
  const std::vector<std::int32_t>* blocks = nullptr;
};

struct prefix_cache_config {
  int block_tokens = 16;
  /// Cached blocks the index keeps at most (the pool tier's budget); at most the pool's size.
  std::size_t capacity_blocks = 0;
  /// Copy evicted blocks out for a KV store.
  bool demote = false;
};

class prefix_cache {
 public:
  /// `pool`, `dev`, `kv`, `hasher`, `clk` and `policy` must outlive the cache.
  prefix_cache(kvcache::block_pool& pool, gpu::backend& dev, gpu::kv_storage& kv,
               const kvcache::block_hasher& hasher, const prefix_cache_config& config,
               const kvcache::clock& clk, const kvcache::retention& policy);

  /// Hashes the full blocks of `tokens` under `salt` (the request's cache namespace) into `job`.
  void begin(const std::vector<std::int32_t>& tokens, std::string_view salt,
             kvcache::scenario_id scenario, job_prefix& job) const;
  /// Pins the leading blocks the pool holds and appends them to `blocks` (empty before).
  void take_pooled(job_prefix& job, std::vector<std::int32_t>& blocks);
  /// Appends `count` fresh blocks to `blocks`, evicting cached blocks (prefix_index order) when
  /// the pool is short; false, changing nothing in `blocks`, when even that is not enough.
  bool allocate(int count, std::vector<std::int32_t>& blocks);
  /// Writes `host + ssd` blocks fetched from the KV store (in payload layout, one after the
  /// other) into the job's blocks after its pooled ones, and caches them.
  void adopt_fetched(job_prefix& job, std::vector<std::int32_t>& blocks,
                     const std::vector<std::uint8_t>& bytes, int host, int ssd);
  /// Caches every block of the job that `computed_tokens` filled and is not cached yet.
  void cache_computed(job_prefix& job, std::vector<std::int32_t>& blocks, int computed_tokens);
  /// Ends the job: unpins its prefix and gives back its blocks (cleared). Full blocks it computed
  /// that the index could not keep are copied out for the KV store.
  void finish(job_prefix& job, std::vector<std::int32_t>& blocks, int computed_tokens);
  /// Drops expired unpinned blocks.
  void expire();

  /// Index changes since the last call, in order, for the router: each hash with 1 when it was
  /// cached and 0 when it was dropped. Appends to both vectors.
  void take_events(std::vector<kvcache::block_hash>& hashes, std::vector<std::uint8_t>& stored);
  /// Blocks evicted (or not kept) since the last call, for the KV store.
  std::vector<demoted_block> take_demotions();

  /// The bytes of one block in payload layout.
  std::size_t block_bytes() const { return block_bytes_; }
  const kvcache::prefix_index& index() const { return index_; }

  /// Checks the reference-count equation above for every block of the pool, each job's held
  /// prefix against the index, and the index's own invariants. `jobs`: every job holding blocks.
  status check_invariants(const std::vector<job_blocks>& jobs) const;
  /// Checks that a step may write positions [first, first + count) of `blocks`: each such block
  /// belongs to this job alone (reference count 1, so not cached and not shared).
  status check_writable(const std::vector<std::int32_t>& blocks, int first, int count) const;

 private:
  void drop(const std::vector<kvcache::removed_block>& removed, bool demote);
  void copy_out(std::int32_t block, std::vector<std::uint8_t>& bytes) const;
  bool cache_block(job_prefix& job, std::vector<std::int32_t>& blocks, std::size_t position);

  kvcache::block_pool& pool_;
  const kvcache::block_hasher& hasher_;
  kv_block_codec codec_;
  prefix_cache_config config_;
  kvcache::prefix_index index_;
  std::size_t block_bytes_ = 0;
  std::vector<kvcache::block_hash> event_hashes_;
  std::vector<std::uint8_t> event_stored_;
  std::vector<demoted_block> demotions_;
};

}  // namespace brigade::actors

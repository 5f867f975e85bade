#include "actors/prefix_cache.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "common/log.hpp"

namespace brigade::actors {

prefix_cache::prefix_cache(kvcache::block_pool& pool, gpu::backend& dev, gpu::kv_storage& kv,
                           const kvcache::block_hasher& hasher, const prefix_cache_config& config,
                           const kvcache::clock& clk, const kvcache::retention& policy)
    : pool_(pool),
      hasher_(hasher),
      codec_(dev, kv),
      config_(config),
      index_(
          std::min<std::size_t>(config.capacity_blocks, static_cast<std::size_t>(pool.capacity())),
          clk, policy) {
  block_bytes_ = codec_.block_bytes();
}

void prefix_cache::begin(const std::vector<std::int32_t>& tokens, std::string_view salt,
                         kvcache::scenario_id scenario, job_prefix& job) const {
  const auto bt = static_cast<std::size_t>(config_.block_tokens);
  job = job_prefix{};
  job.scenario = scenario;
  job.chain = hasher_.chain(tokens.data(), tokens.size(), bt, salt);
  // The last prompt token is always computed: its logits choose the first output token.
  job.reusable = tokens.empty() ? 0 : (tokens.size() - 1) / bt;
}

void prefix_cache::take_pooled(job_prefix& job, std::vector<std::int32_t>& blocks) {
  const std::size_t n = std::min(index_.match(job.chain), job.reusable);
  std::vector<std::int64_t> ids;
  status pinned = index_.acquire(job.chain, n, job.scenario, ids);
  if (!pinned) {
    // match() just saw these blocks: failing here is a bug in the index, not a miss.
    log::error("prefix_cache", "acquire after match failed: " + pinned.err().message);
    return;
  }
  for (std::int64_t id : ids) {
    pool_.retain(static_cast<std::int32_t>(id));
    blocks.push_back(static_cast<std::int32_t>(id));
  }
  job.held = n;
  job.pool_blocks = static_cast<int>(n);
}

bool prefix_cache::allocate(int count, std::vector<std::int32_t>& blocks) {
  const int short_by = count - pool_.free_blocks();
  if (short_by > 0) {
    if (static_cast<std::size_t>(short_by) > index_.evictable()) return false;
    std::vector<kvcache::removed_block> removed;
    index_.evict(static_cast<std::size_t>(short_by), removed);
    drop(removed, config_.demote);
  }
  return pool_.allocate(count, blocks);
}

void prefix_cache::adopt_fetched(job_prefix& job, std::vector<std::int32_t>& blocks,
                                 const std::vector<std::uint8_t>& bytes, int host, int ssd) {
  const std::size_t first = job.held;
  const int count = host + ssd;
  for (int i = 0; i < count; ++i) {
    codec_.unpack_bytes(bytes.data() + static_cast<std::size_t>(i) * block_bytes_,
                        blocks[first + static_cast<std::size_t>(i)]);
  }
  job.host_blocks = host;
  job.ssd_blocks = ssd;
  for (int i = 0; i < count && job.insertable; ++i) {
    if (!cache_block(job, blocks, first + static_cast<std::size_t>(i))) break;
  }
}

void prefix_cache::cache_computed(job_prefix& job, std::vector<std::int32_t>& blocks,
                                  int computed_tokens) {
  const std::size_t full =
      std::min(job.chain.size(), static_cast<std::size_t>(computed_tokens / config_.block_tokens));
  // Blocks fetched from the store that the index refused sit before the first computed block;
  // nothing after them can be cached (a cached block needs its parent cached).
  while (job.insertable && job.held < full) {
    if (!cache_block(job, blocks, job.held)) break;
  }
}

bool prefix_cache::cache_block(job_prefix& job, std::vector<std::int32_t>& blocks,
                               std::size_t position) {
  std::vector<kvcache::removed_block> removed;
  auto outcome = index_.insert(job.chain, position, blocks[position], job.scenario, removed);
  drop(removed, config_.demote);
  if (!outcome) {
    // Every cached block is in use: this one and the rest of the job stay private.
    job.insertable = false;
    return false;
  }
  const auto cached = static_cast<std::int32_t>(outcome.value().block_id);
  if (outcome.value().inserted) {
    pool_.retain(cached);  // the index's own reference
    event_hashes_.push_back(job.chain[position]);
    event_stored_.push_back(1);
  } else {
    // Another job cached an equal block first: read that one and free this copy.
    pool_.retain(cached);
    pool_.release(blocks[position]);
    blocks[position] = cached;
  }
  job.held = position + 1;
  return true;
}

void prefix_cache::finish(job_prefix& job, std::vector<std::int32_t>& blocks, int computed_tokens) {
  if (config_.demote) {
    // Full blocks the index could not keep still reach the node's store.
    const std::size_t full = std::min(
        job.chain.size(), static_cast<std::size_t>(computed_tokens / config_.block_tokens));
    const auto first = std::max(job.held, static_cast<std::size_t>(job.first_computed()));
    for (std::size_t i = first; i < full && i < blocks.size(); ++i) {
      demoted_block d;
      d.hash = job.chain[i];
      d.scenario = job.scenario;
      copy_out(blocks[i], d.bytes);
      demotions_.push_back(std::move(d));
    }
  }
  status released = index_.release(job.chain, job.held);
  if (!released) log::error("prefix_cache", "release failed: " + released.err().message);
  pool_.release_all(blocks);
  blocks.clear();
  job.held = 0;
}

void prefix_cache::expire() {
  std::vector<kvcache::removed_block> removed;
  if (index_.expire(removed) > 0) drop(removed, false);
}

void prefix_cache::drop(const std::vector<kvcache::removed_block>& removed, bool demote) {
  for (const auto& r : removed) {
    const auto block = static_cast<std::int32_t>(r.block_id);
    if (demote) {
      demoted_block d;
      d.hash = r.hash;
      d.scenario = r.scenario;
      copy_out(block, d.bytes);
      demotions_.push_back(std::move(d));
    }
    pool_.release(block);
    event_hashes_.push_back(r.hash);
    event_stored_.push_back(0);
  }
}

void prefix_cache::copy_out(std::int32_t block, std::vector<std::uint8_t>& bytes) const {
  // A vector's buffer is aligned for any fundamental type: the floats go straight into it.
  bytes.resize(block_bytes_);
  codec_.pack(&block, 1, reinterpret_cast<float*>(bytes.data()));
}

void prefix_cache::take_events(std::vector<kvcache::block_hash>& hashes,
                               std::vector<std::uint8_t>& stored) {
  hashes.insert(hashes.end(), event_hashes_.begin(), event_hashes_.end());
  stored.insert(stored.end(), event_stored_.begin(), event_stored_.end());
  event_hashes_.clear();
  event_stored_.clear();
}

std::vector<demoted_block> prefix_cache::take_demotions() {
  std::vector<demoted_block> out;
  out.swap(demotions_);
  return out;
}

status prefix_cache::check_invariants(const std::vector<job_blocks>& jobs) const {
  if (status s = index_.check_invariants(); !s) return s;
  std::vector<int> expected(static_cast<std::size_t>(pool_.capacity()), 0);
  std::map<kvcache::block_hash, int> pins;
  for (const auto& j : jobs) {
    for (std::int32_t b : *j.blocks)
      ++expected[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < j.prefix->held; ++i) {
      const auto e = index_.find(j.prefix->chain[i]);
      if (!e || e->block_id != (*j.blocks)[i]) {
        return error(errc::internal, "a job reads block " + std::to_string((*j.blocks)[i]) +
                                         " at position " + std::to_string(i) +
                                         " that the index does not cache there");
      }
      ++pins[j.prefix->chain[i]];
    }
  }
  for (const auto& [hash, count] : pins) {
    const auto e = index_.find(hash);
    if (e->refcount != count) {
      return error(errc::internal, "block " + std::to_string(e->block_id) + " has " +
                                       std::to_string(e->refcount) + " index references but " +
                                       std::to_string(count) + " jobs hold it");
    }
  }
  if (pins.size() != index_.referenced()) {
    return error(errc::internal, "the index has pinned blocks that no job holds (a leak)");
  }
  // Beyond its jobs, a block has exactly one more reference when the index caches it.
  std::size_t cached = 0;
  for (std::size_t b = 0; b < expected.size(); ++b) {
    const int extra = pool_.ref_count(static_cast<std::int32_t>(b)) - expected[b];
    if (extra < 0) {
      return error(errc::internal, "block " + std::to_string(b) + " is held by " +
                                       std::to_string(expected[b]) + " jobs but counts " +
                                       std::to_string(expected[b] + extra) +
                                       " references: in use and freed");
    }
    if (extra > 1) {
      return error(errc::internal, "block " + std::to_string(b) + " has " + std::to_string(extra) +
                                       " references nobody holds (a leak)");
    }
    cached += static_cast<std::size_t>(extra);
  }
  if (cached != index_.size()) {
    return error(errc::internal, std::to_string(cached) +
                                     " blocks carry the index's reference "
                                     "but it caches " +
                                     std::to_string(index_.size()));
  }
  return ok_status();
}

status prefix_cache::check_writable(const std::vector<std::int32_t>& blocks, int first,
                                    int count) const {
  if (count <= 0) return ok_status();
  const int bt = config_.block_tokens;
  for (int b = first / bt; b <= (first + count - 1) / bt; ++b) {
    const std::int32_t block = blocks.at(static_cast<std::size_t>(b));
    if (pool_.ref_count(block) != 1) {
      return error(errc::internal, "a step writes block " + std::to_string(block) + " (position " +
                                       std::to_string(b * bt) + ") which has " +
                                       std::to_string(pool_.ref_count(block)) + " holders");
    }
  }
  return ok_status();
}

}  // namespace brigade::actors

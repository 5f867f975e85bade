// The host-memory and SSD tiers of the prefix KV cache behind one interface.
//
// A block moves down when the host tier evicts it (demotion: written to SSD) and up when a
// lookup finds it only on SSD (promotion: read, verified and put in host memory). Both run on one
// background thread fed by a bounded queue, so put(), lookup_prefix() and fetch() never wait on
// the disk: a lookup reports an SSD block as available with its promotion started, and the caller
// either waits for the lookup's ticket or computes the block itself.
//
//   put ──> host tier ──evict──> pending demotion ──write──> SSD tier
//              ^                  (still served)                │
//              └──────────────── promotion <──── lookup hit ────┘
//
// A block evicted from host memory stays readable from the pending-demotion set until its file is
// written, and a lookup that hits it there takes it back into the host tier. The SSD copy stays
// when a block is promoted, so demoting it again only refreshes its last use.
//
// A full disk pauses demotion: one warning, evicted blocks are dropped as if there were no SSD
// tier (nothing resident in host memory is touched), and after disk_full_retry_ms the next
// demotion tries again. Any other write failure (EIO, a read-only remount) pauses it the same way.
// A damaged SSD block is dropped by the SSD tier and its promotion fails: the caller finds it
// missing after the wait and recomputes it.
//
// Thread-safe: every public call may come from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "kvcache/host_tier.hpp"
#include "kvcache/ssd_tier.hpp"

namespace brigade::kvcache {

struct tiered_store_config {
  std::uint64_t host_budget_bytes = 0;
  /// The SSD tier's directory (see ssd_tier); empty for a host-only store.
  std::string ssd_dir;
  std::uint64_t ssd_budget_bytes = 0;
  /// See ssd_tier_config::drop_page_cache.
  bool ssd_drop_page_cache = true;
  /// See ssd_tier_config::key_id.
  std::uint64_t hash_key_id = 0;
  /// The most demotions and promotions waiting for the background thread. Beyond it a demotion
  /// is dropped and a promotion is not started; blocks waiting for demotion are host memory over
  /// the host budget, at most this many.
  std::size_t queue_capacity = 256;
  /// How long demotion stays paused after a full disk (or another write failure), in the store
  /// clock's time.
  std::chrono::milliseconds disk_full_retry_ms{30000};
  /// Called on the background thread after each job's work, before the job counts as done
  /// (wait_for and wait_idle wait for it too), with its ticket (an actor sends itself a message
  /// here); must not call back into the store.
  std::function<void(std::uint64_t ticket)> on_job_done;
};

/// Where an available block of a looked-up prefix is.
enum class tier_location : std::uint8_t {
  /// In host memory: fetch() returns it now.
  host,
  /// On SSD with its promotion started: fetch() returns it once the lookup's ticket is done.
  ssd,
};

struct prefix_lookup {
  /// The tier of each leading available block, one per block, in chain order.
  std::vector<tier_location> where;
  std::size_t host_blocks = 0;
  std::size_t ssd_blocks = 0;
  /// wait_for(ticket) returns once every promotion this lookup relies on has finished; 0 when
  /// there is none.
  std::uint64_t ticket = 0;

  std::size_t available() const { return where.size(); }
};

/// The background thread's jobs, named for the test hook.
enum class store_job : std::uint8_t { demote, promote, sweep };

/// Lookup outcomes of one scenario, counted per block.
struct scenario_lookups {
  std::uint64_t host_hits = 0;
  std::uint64_t ssd_hits = 0;
  std::uint64_t misses = 0;
};

struct store_stats {
  tier_stats host;
  /// All zero without an SSD tier.
  tier_stats ssd;
  bool has_ssd = false;
  /// Blocks that lookup_prefix() found in host memory (pending demotions included) and on SSD,
  /// and the block it stopped at, per lookup that did not find the whole chain.
  std::uint64_t lookup_host_hits = 0;
  std::uint64_t lookup_ssd_hits = 0;
  std::uint64_t lookup_misses = 0;
  /// Indexed by scenario_id.
  std::vector<scenario_lookups> lookups_by_scenario;
  /// Blocks written to SSD (or refreshed there) after leaving host memory.
  std::uint64_t demotions = 0;
  /// Evicted blocks that did not reach SSD: queue full, demotion paused, or the write failed.
  std::uint64_t demotions_dropped = 0;
  /// Blocks read from SSD into host memory.
  std::uint64_t promotions = 0;
  /// Promotions whose SSD read missed (damaged, expired or deleted meanwhile).
  std::uint64_t promotions_failed = 0;
  /// SSD blocks a lookup could not start a promotion for (queue full); the lookup stopped there.
  std::uint64_t promotions_refused = 0;
  /// Full-disk episodes: each one warned once and paused demotion.
  std::uint64_t disk_full_pauses = 0;
  /// Episodes of other write failures (EIO, a read-only remount): handled like a full disk.
  std::uint64_t write_error_pauses = 0;
  bool demotion_paused = false;
  std::uint64_t pending_demotions = 0;
  std::uint64_t queue_depth = 0;
  std::uint64_t queue_capacity = 0;
};

class tiered_store {
 public:
  /// Opens the tiers (the SSD one indexes what its directory holds) and starts the background
  /// thread. `clk` and `policy` must outlive the store.
  static result<std::unique_ptr<tiered_store>> open(const tiered_store_config& config,
                                                    const clock& clk, const retention& policy);
  /// Finishes the queued demotions (promotions and sweeps are dropped) and stops the thread.
  ~tiered_store();
  tiered_store(const tiered_store&) = delete;
  tiered_store& operator=(const tiered_store&) = delete;

  /// Caches a block a worker computed, used now under `scenario`, in host memory; what the host
  /// tier evicts for it is queued for demotion.
  void put(payload_ptr payload, scenario_id scenario);

  /// How many leading blocks of `hashes` (chain hashes of `model`'s blocks) are available, and
  /// where; a use of each under `scenario`. Starts the promotion of each one found only on SSD.
  /// Stops at the first block in no tier, or on SSD when the queue is full.
  prefix_lookup lookup_prefix(const model_fingerprint& model, const std::vector<block_hash>& hashes,
                              scenario_id scenario);

  /// Appends the leading blocks of `hashes` that are in host memory now to `out` and returns
  /// how many; stops at the first that is not. The payloads stay valid while `out` holds them.
  std::size_t fetch(const model_fingerprint& model, const std::vector<block_hash>& hashes,
                    scenario_id scenario, std::vector<payload_ptr>& out);

  /// Waits until the job with `ticket` (and every one before it) is done; false on timeout.
  bool wait_for(std::uint64_t ticket, std::chrono::milliseconds timeout);
  /// Waits until the queue is empty and the background thread idle; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);

  /// Drops expired blocks from host memory now and queues a sweep of the SSD tier.
  void expire();

  store_stats stats() const;
  host_tier& host() { return *host_; }
  /// Null for a host-only store.
  ssd_tier* ssd() { return ssd_.get(); }

 private:
  struct job {
    store_job kind = store_job::demote;
    std::uint64_t ticket = 0;
    /// demote: the block leaving host memory.
    tier_block block;
    /// promote: the block to read, and the scenario of the lookup that asked for it.
    std::optional<model_fingerprint> model;
    block_hash hash;
    scenario_id scenario = retention::chat;
  };

  tiered_store(const tiered_store_config& config, const clock& clk, const retention& policy,
               std::unique_ptr<ssd_tier> ssd);

  payload_ptr host_resident_locked(const model_fingerprint& model, block_hash hash,
                                   scenario_id scenario);
  void demote_locked(std::vector<tier_block>& evicted);
  std::uint64_t enqueue_locked(job j);
  void run_background();
  void run_demote(const job& j);
  void run_promote(const job& j);
  void pause_demotion_locked(const error& why);
  scenario_lookups& lookups_of_locked(scenario_id scenario);

  const tiered_store_config config_;
  const clock& clock_;
  const retention& retention_;
  std::unique_ptr<host_tier> host_;
  std::unique_ptr<ssd_tier> ssd_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<job> queue_;
  /// Blocks evicted from host memory whose demotion has not finished; still served.
  std::unordered_map<block_key, tier_block, block_key_hasher> pending_demotions_;
  /// Blocks being promoted, with the ticket of their promotion.
  std::unordered_map<block_key, std::uint64_t, block_key_hasher> promoting_;
  std::uint64_t next_ticket_ = 1;
  std::uint64_t done_ticket_ = 0;
  bool stopping_ = false;
  /// Demotion is paused until this time after a full disk.
  bool demotion_paused_ = false;
  time_ns retry_demotion_at_ns_ = 0;
  bool warned_block_too_large_ = false;
  store_stats counters_;
  std::thread worker_;
};

}  // namespace brigade::kvcache

#include "kvcache/tiered_store.hpp"

#include <algorithm>

#include "common/log.hpp"

namespace brigade::kvcache {

result<std::unique_ptr<tiered_store>> tiered_store::open(const tiered_store_config& config,
                                                         const clock& clk,
                                                         const retention& policy) {
  if (config.queue_capacity == 0) {
    return error(errc::invalid_argument, "the KV store's queue capacity must be positive");
  }
  std::unique_ptr<ssd_tier> ssd;
  if (!config.ssd_dir.empty()) {
    ssd_tier_config ssd_config;
    ssd_config.dir = config.ssd_dir;
    ssd_config.budget_bytes = config.ssd_budget_bytes;
    ssd_config.drop_page_cache = config.ssd_drop_page_cache;
    ssd_config.key_id = config.hash_key_id;
    result<std::unique_ptr<ssd_tier>> opened = ssd_tier::open(ssd_config, clk, policy);
    if (!opened.ok()) return opened.err();
    ssd = std::move(*opened);
  }
  return std::unique_ptr<tiered_store>(new tiered_store(config, clk, policy, std::move(ssd)));
}

tiered_store::tiered_store(const tiered_store_config& config, const clock& clk,
                           const retention& policy, std::unique_ptr<ssd_tier> ssd)
    : config_(config),
      clock_(clk),
      retention_(policy),
      host_(std::make_unique<host_tier>(config.host_budget_bytes, clk, policy)),
      ssd_(std::move(ssd)) {
  counters_.has_ssd = ssd_ != nullptr;
  counters_.queue_capacity = config.queue_capacity;
  worker_ = std::thread([this] { run_background(); });
}

tiered_store::~tiered_store() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void tiered_store::put(payload_ptr payload, scenario_id scenario) {
  std::vector<tier_block> evicted;
  std::lock_guard<std::mutex> lock(mutex_);
  // A copy waiting for demotion is superseded: its job finds it gone and skips the write.
  pending_demotions_.erase(payload->key());
  host_->put(std::move(payload), scenario, evicted);
  demote_locked(evicted);
}

prefix_lookup tiered_store::lookup_prefix(const model_fingerprint& model,
                                          const std::vector<block_hash>& hashes,
                                          scenario_id scenario) {
  prefix_lookup found;
  found.where.reserve(hashes.size());
  std::lock_guard<std::mutex> lock(mutex_);
  scenario_lookups& counts = lookups_of_locked(scenario);
  for (block_hash hash : hashes) {
    if (host_resident_locked(model, hash, scenario) != nullptr) {
      found.where.push_back(tier_location::host);
      continue;
    }
    const block_key key{model.digest(), hash};
    auto promoting = promoting_.find(key);
    std::uint64_t ticket = promoting != promoting_.end() ? promoting->second : 0;
    if (ticket == 0 && ssd_ != nullptr && ssd_->contains(key)) {
      job j;
      j.kind = store_job::promote;
      j.model = model;
      j.hash = hash;
      j.scenario = scenario;
      ticket = enqueue_locked(std::move(j));
      if (ticket == 0) {
        ++counters_.promotions_refused;
        break;
      }
      promoting_.emplace(key, ticket);
    }
    if (ticket == 0) break;
    found.where.push_back(tier_location::ssd);
    found.ticket = std::max(found.ticket, ticket);
  }
  for (tier_location where : found.where)
    ++(where == tier_location::host ? found.host_blocks : found.ssd_blocks);
  counters_.lookup_host_hits += found.host_blocks;
  counters_.lookup_ssd_hits += found.ssd_blocks;
  counts.host_hits += found.host_blocks;
  counts.ssd_hits += found.ssd_blocks;
  if (found.available() < hashes.size()) {
    ++counters_.lookup_misses;
    ++counts.misses;
  }
  return found;
}

std::size_t tiered_store::fetch(const model_fingerprint& model,
                                const std::vector<block_hash>& hashes, scenario_id scenario,
                                std::vector<payload_ptr>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (block_hash hash : hashes) {
    payload_ptr payload = host_resident_locked(model, hash, scenario);
    if (payload == nullptr) break;
    out.push_back(std::move(payload));
    ++count;
  }
  return count;
}

payload_ptr tiered_store::host_resident_locked(const model_fingerprint& model, block_hash hash,
                                               scenario_id scenario) {
  const block_key key{model.digest(), hash};
  payload_ptr payload = host_->get(key, scenario);
  if (payload == nullptr) {
    auto pending = pending_demotions_.find(key);
    if (pending == pending_demotions_.end()) return nullptr;
    // Used again before its demotion finished: back into the host tier, whose LRU block may
    // take its place in the queue.
    payload = pending->second.payload;
    const scenario_id label = longer_retention(retention_, pending->second.scenario, scenario);
    pending_demotions_.erase(pending);
    std::vector<tier_block> evicted;
    host_->put(payload, label, evicted);
    demote_locked(evicted);
  }
  // Keys carry only the fingerprint's digest; the full text is compared so that a digest
  // collision can never serve another model's block.
  return payload->model() == model ? payload : nullptr;
}

void tiered_store::demote_locked(std::vector<tier_block>& evicted) {
  if (ssd_ == nullptr) return;
  const time_ns now = clock_.now();
  if (demotion_paused_ && now < retry_demotion_at_ns_) {
    counters_.demotions_dropped += evicted.size();
    return;
  }
  for (tier_block& block : evicted) {
    const block_key key = block.payload->key();
    job j;
    j.kind = store_job::demote;
    j.block = block;
    if (enqueue_locked(std::move(j)) == 0) {
      ++counters_.demotions_dropped;
      continue;
    }
    pending_demotions_[key] = std::move(block);
  }
}

std::uint64_t tiered_store::enqueue_locked(job j) {
  if (queue_.size() >= config_.queue_capacity || stopping_) return 0;
  j.ticket = next_ticket_++;
  const std::uint64_t ticket = j.ticket;
  queue_.push_back(std::move(j));
  work_ready_.notify_one();
  return ticket;
}

void tiered_store::expire() {
  std::vector<tier_block> expired;
  host_->expire(expired);
  std::lock_guard<std::mutex> lock(mutex_);
  const time_ns now = clock_.now();
  for (auto it = pending_demotions_.begin(); it != pending_demotions_.end();) {
    const bool gone = expiry_of(retention_, it->second.scenario, it->second.last_use_ns) <= now;
    it = gone ? pending_demotions_.erase(it) : std::next(it);
  }
  if (ssd_ != nullptr) {
    job j;
    j.kind = store_job::sweep;
    enqueue_locked(std::move(j));
  }
}

bool tiered_store::wait_for(std::uint64_t ticket, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return work_done_.wait_for(lock, timeout, [&] { return done_ticket_ >= ticket; });
}

bool tiered_store::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return work_done_.wait_for(lock, timeout, [&] { return done_ticket_ + 1 == next_ticket_; });
}

store_stats tiered_store::stats() const {
  store_stats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = counters_;
    s.demotion_paused = demotion_paused_;
    s.pending_demotions = pending_demotions_.size();
    s.queue_depth = queue_.size();
  }
  s.host = host_->stats();
  if (ssd_ != nullptr) s.ssd = ssd_->stats();
  return s;
}

scenario_lookups& tiered_store::lookups_of_locked(scenario_id scenario) {
  if (counters_.lookups_by_scenario.size() <= scenario) {
    counters_.lookups_by_scenario.resize(static_cast<std::size_t>(scenario) + 1);
  }
  return counters_.lookups_by_scenario[scenario];
}

void tiered_store::run_background() {
  for (;;) {
    job j;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      j = std::move(queue_.front());
      queue_.pop_front();
      stopping = stopping_;
    }
    // On shutdown only demotions run: they keep blocks across the restart.
    const bool run = !stopping || j.kind == store_job::demote;
    if (run && j.kind == store_job::demote) run_demote(j);
    if (run && j.kind == store_job::promote) run_promote(j);
    if (run && j.kind == store_job::sweep) ssd_->expire();
    // Before the job counts as done, so that whoever waits for it also waits for the hook.
    if (config_.on_job_done) config_.on_job_done(j.ticket);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (j.kind == store_job::promote) promoting_.erase({j.model->digest(), j.hash});
      done_ticket_ = j.ticket;
    }
    work_done_.notify_all();
  }
}

void tiered_store::run_demote(const job& j) {
  const block_key key = j.block.payload->key();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto pending = pending_demotions_.find(key);
    // Taken back into host memory, or superseded by a put, since it was queued.
    if (pending == pending_demotions_.end() || pending->second.payload != j.block.payload) return;
    const time_ns now = clock_.now();
    const bool paused = demotion_paused_ && now < retry_demotion_at_ns_;
    const bool expired = expiry_of(retention_, j.block.scenario, j.block.last_use_ns) <= now;
    if (paused || expired) {
      pending_demotions_.erase(pending);
      counters_.demotions_dropped += paused ? 1 : 0;
      return;
    }
  }
  status stored = ssd_->put(j.block);
  std::lock_guard<std::mutex> lock(mutex_);
  auto pending = pending_demotions_.find(key);
  if (pending != pending_demotions_.end() && pending->second.payload == j.block.payload) {
    pending_demotions_.erase(pending);
  }
  if (stored.ok()) {
    ++counters_.demotions;
    if (demotion_paused_) {
      demotion_paused_ = false;
      log::info("kvcache", "SSD tier " + ssd_->dir() + " accepts blocks again: demotion resumed");
    }
    return;
  }
  ++counters_.demotions_dropped;
  if (stored.err().code == errc::invalid_argument) {
    // A block larger than the whole SSD budget: a configuration error, said once.
    if (!warned_block_too_large_) {
      warned_block_too_large_ = true;
      log::warn("kvcache", "KV blocks are not demoted to SSD: " + stored.err().message);
    }
    return;
  }
  pause_demotion_locked(stored.err());
}

void tiered_store::pause_demotion_locked(const error& why) {
  retry_demotion_at_ns_ = clock_.now() + to_ns(config_.disk_full_retry_ms);
  if (demotion_paused_) return;
  demotion_paused_ = true;
  const bool full = why.code == errc::resource_exhausted;
  ++(full ? counters_.disk_full_pauses : counters_.write_error_pauses);
  log::warn("kvcache", std::string(full ? "SSD tier is full" : "SSD tier cannot write") +
                           ", demotion to SSD paused for " +
                           std::to_string(config_.disk_full_retry_ms.count()) +
                           " ms; blocks stay in host memory while they fit and are otherwise "
                           "recomputed; " +
                           (full ? "free space or lower the SSD budget (" : "check the disk (") +
                           why.message + ")");
}

void tiered_store::run_promote(const job& j) {
  tier_block read = ssd_->get(*j.model, j.hash, j.scenario);
  std::lock_guard<std::mutex> lock(mutex_);
  if (read.payload == nullptr) {
    ++counters_.promotions_failed;
    return;
  }
  std::vector<tier_block> evicted;
  host_->put(std::move(read.payload), read.scenario, evicted);
  demote_locked(evicted);
  ++counters_.promotions;
}

}  // namespace brigade::kvcache

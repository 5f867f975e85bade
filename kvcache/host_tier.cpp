#include "kvcache/host_tier.hpp"

#include <string>

namespace brigade::kvcache {

host_tier::host_tier(std::size_t budget_bytes, const clock& clk, const retention& policy)
    : budget_bytes_(budget_bytes), clock_(clk), retention_(policy) {
  stats_.budget_bytes = budget_bytes;
}

void host_tier::put(payload_ptr payload, scenario_id scenario, std::vector<tier_block>& evicted) {
  if (payload->size_bytes() > budget_bytes_) {
    evicted.push_back({std::move(payload), scenario, clock_.now()});
    return;
  }
  // The time is read under the lock so that the LRU list stays in last-use order.
  std::lock_guard<std::mutex> lock(mutex_);
  const time_ns now = clock_.now();
  const block_key key = payload->key();
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    if (!expired_locked(it->second, now)) {
      scenario = longer_retention(retention_, it->second.scenario, scenario);
    }
    remove_locked(it);
  }
  entry e;
  stats_.bytes += payload->size_bytes();
  e.payload = std::move(payload);
  e.scenario = scenario;
  e.last_use_ns = now;
  e.lru_position = lru_.insert(lru_.end(), key);
  entries_.emplace(key, std::move(e));
  count_scenario_locked(scenario, +1);
  ++stats_.blocks;
  ++stats_.insertions;
  while (stats_.bytes > budget_bytes_) {
    auto victim = entries_.find(lru_.front());
    evicted.push_back(
        {victim->second.payload, victim->second.scenario, victim->second.last_use_ns});
    remove_locked(victim);
    ++stats_.evictions;
  }
}

payload_ptr host_tier::get(const block_key& key, scenario_id scenario) {
  std::lock_guard<std::mutex> lock(mutex_);
  const time_ns now = clock_.now();
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  entry& e = it->second;
  if (expired_locked(e, now)) {
    remove_locked(it);
    ++stats_.expirations;
    ++stats_.misses;
    return nullptr;
  }
  const scenario_id label = longer_retention(retention_, e.scenario, scenario);
  if (label != e.scenario) {
    count_scenario_locked(e.scenario, -1);
    count_scenario_locked(label, +1);
    e.scenario = label;
  }
  e.last_use_ns = now;
  lru_.splice(lru_.end(), lru_, e.lru_position);
  ++stats_.hits;
  return e.payload;
}

bool host_tier::contains(const block_key& key) const {
  const time_ns now = clock_.now();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  return it != entries_.end() && !expired_locked(it->second, now);
}

bool host_tier::erase(const block_key& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  remove_locked(it);
  return true;
}

std::size_t host_tier::expire(std::vector<tier_block>& expired) {
  const time_ns now = clock_.now();
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (expired_locked(it->second, now)) {
      expired.push_back({it->second.payload, it->second.scenario, it->second.last_use_ns});
      remove_locked(it);
      ++stats_.expirations;
      ++count;
    }
    it = next;
  }
  return count;
}

tier_stats host_tier::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void host_tier::remove_locked(entry_map::iterator it) {
  stats_.bytes -= it->second.payload->size_bytes();
  --stats_.blocks;
  count_scenario_locked(it->second.scenario, -1);
  lru_.erase(it->second.lru_position);
  entries_.erase(it);
}

void host_tier::count_scenario_locked(scenario_id scenario, int delta) {
  if (stats_.blocks_by_scenario.size() <= scenario) {
    stats_.blocks_by_scenario.resize(static_cast<std::size_t>(scenario) + 1, 0);
  }
  stats_.blocks_by_scenario[scenario] +=
      static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
}

bool host_tier::expired_locked(const entry& e, time_ns now) const {
  return expiry_of(retention_, e.scenario, e.last_use_ns) <= now;
}

status host_tier::check_invariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lru_.size() != entries_.size() || entries_.size() != stats_.blocks) {
    return error(errc::internal, "host tier: " + std::to_string(lru_.size()) + " LRU entries, " +
                                     std::to_string(entries_.size()) + " map entries, " +
                                     std::to_string(stats_.blocks) + " counted blocks");
  }
  std::uint64_t bytes = 0;
  std::vector<std::uint64_t> by_scenario(stats_.blocks_by_scenario.size(), 0);
  time_ns previous_use_ns = 0;
  for (const block_key& key : lru_) {
    auto it = entries_.find(key);
    if (it == entries_.end() || &*it->second.lru_position != &key) {
      return error(errc::internal, "host tier: an LRU entry has no map entry pointing back at it");
    }
    if (it->second.payload->key() != key) {
      return error(errc::internal, "host tier: a block is stored under another block's key");
    }
    if (it->second.last_use_ns < previous_use_ns) {
      return error(errc::internal, "host tier: the LRU list is out of last-use order");
    }
    previous_use_ns = it->second.last_use_ns;
    bytes += it->second.payload->size_bytes();
    if (it->second.scenario >= by_scenario.size()) {
      return error(errc::internal, "host tier: a block's scenario is not counted");
    }
    ++by_scenario[it->second.scenario];
  }
  if (bytes != stats_.bytes || by_scenario != stats_.blocks_by_scenario) {
    return error(errc::internal, "host tier: counted " + std::to_string(stats_.bytes) +
                                     " bytes, holds " + std::to_string(bytes));
  }
  if (bytes > budget_bytes_) {
    return error(errc::internal, "host tier: holds " + std::to_string(bytes) +
                                     " bytes over its budget of " + std::to_string(budget_bytes_));
  }
  return ok_status();
}

}  // namespace brigade::kvcache

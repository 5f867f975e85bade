#include "kvcache/global_prefix_index.hpp"

#include <algorithm>
#include <iterator>
#include <string>

namespace brigade::kvcache {

global_prefix_index::global_prefix_index(std::size_t worker_count)
    : blocks_per_worker_(worker_count, 0) {}

status global_prefix_index::check_worker(worker_id w) const {
  if (w < blocks_per_worker_.size()) return ok_status();
  return error(errc::invalid_argument, "cache event from worker " + std::to_string(w) +
                                           ", but the router knows only " +
                                           std::to_string(blocks_per_worker_.size()) + " workers");
}

status global_prefix_index::apply(const blocks_stored& event) {
  if (status s = check_worker(event.worker); !s) return s;
  std::size_t duplicates = 0;
  for (block_hash h : event.hashes) {
    auto& workers = holders_[h];
    auto at = std::lower_bound(workers.begin(), workers.end(), event.worker);
    if (at != workers.end() && *at == event.worker) {
      ++duplicates;
      continue;
    }
    workers.insert(at, event.worker);
    ++blocks_per_worker_[event.worker];
  }
  if (duplicates == 0) return ok_status();
  return error(errc::internal, "worker " + std::to_string(event.worker) + " reported " +
                                   std::to_string(duplicates) +
                                   " stored blocks it already held: a duplicated event");
}

status global_prefix_index::apply(const blocks_removed& event) {
  if (status s = check_worker(event.worker); !s) return s;
  std::size_t unknown = 0;
  for (block_hash h : event.hashes) {
    auto it = holders_.find(h);
    if (it == holders_.end()) {
      ++unknown;
      continue;
    }
    auto& workers = it->second;
    auto at = std::lower_bound(workers.begin(), workers.end(), event.worker);
    if (at == workers.end() || *at != event.worker) {
      ++unknown;
      continue;
    }
    workers.erase(at);
    --blocks_per_worker_[event.worker];
    if (workers.empty()) holders_.erase(it);
  }
  if (unknown == 0) return ok_status();
  return error(errc::internal, "worker " + std::to_string(event.worker) + " removed " +
                                   std::to_string(unknown) +
                                   " blocks it was not known to hold: a lost store event");
}

status global_prefix_index::apply(const cache_cleared& event) {
  if (status s = check_worker(event.worker); !s) return s;
  for (auto it = holders_.begin(); it != holders_.end();) {
    auto& workers = it->second;
    auto at = std::lower_bound(workers.begin(), workers.end(), event.worker);
    if (at != workers.end() && *at == event.worker) workers.erase(at);
    it = workers.empty() ? holders_.erase(it) : std::next(it);
  }
  blocks_per_worker_[event.worker] = 0;
  return ok_status();
}

void global_prefix_index::match(const std::vector<block_hash>& chain,
                                std::vector<std::size_t>& leading) const {
  leading.assign(blocks_per_worker_.size(), 0);
  // Workers still holding every block so far; it only shrinks along the chain.
  std::vector<worker_id> alive;
  std::vector<worker_id> next;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    auto it = holders_.find(chain[i]);
    if (it == holders_.end()) return;
    if (i == 0) {
      alive = it->second;
    } else {
      next.clear();
      std::set_intersection(alive.begin(), alive.end(), it->second.begin(), it->second.end(),
                            std::back_inserter(next));
      alive.swap(next);
    }
    if (alive.empty()) return;
    for (worker_id w : alive)
      leading[w] = i + 1;
  }
}

bool global_prefix_index::holds(worker_id w, block_hash hash) const {
  auto it = holders_.find(hash);
  return it != holders_.end() && std::binary_search(it->second.begin(), it->second.end(), w);
}

}  // namespace brigade::kvcache

#include "kvcache/prefix_index.hpp"

#include <algorithm>
#include <cassert>
#include <string>

namespace brigade::kvcache {

struct prefix_index::entry {
  block_hash hash = 0;
  /// The hash of the block before this one; meaningless at depth 0.
  block_hash parent = 0;
  std::int64_t block_id = 0;
  time_ns last_access_ns = 0;
  time_ns expiry_ns = 0;
  std::int32_t refcount = 0;
  /// Cached entries whose parent is this one, and how many of them are referenced.
  std::uint32_t children = 0;
  std::uint32_t pinned_children = 0;
  /// The block's position in its chain: 0 for the first block of a prompt.
  std::uint32_t depth = 0;
  /// The scenario whose retention set the current expiry.
  scenario_id scenario = retention::chat;
  entry* lru_prev = nullptr;
  entry* lru_next = nullptr;
};

bool prefix_index::expiry_key::operator<(const expiry_key& o) const {
  if (expiry_ns != o.expiry_ns) return expiry_ns < o.expiry_ns;
  if (depth != o.depth) return depth > o.depth;
  return hash < o.hash;
}

prefix_index::prefix_index(std::size_t capacity_blocks, const clock& clk, const retention& policy)
    : capacity_blocks_(capacity_blocks), clock_(clk), retention_(policy) {}

prefix_index::~prefix_index() = default;

const prefix_index::entry* prefix_index::live_entry(block_hash hash, time_ns now) const {
  auto it = entries_.find(hash);
  if (it == entries_.end() || it->second.expiry_ns <= now) return nullptr;
  return &it->second;
}

prefix_index::entry* prefix_index::find_entry(block_hash hash) {
  auto it = entries_.find(hash);
  return it == entries_.end() ? nullptr : &it->second;
}

std::size_t prefix_index::match(const std::vector<block_hash>& chain) const {
  const time_ns now = clock_.now();
  std::size_t n = 0;
  while (n < chain.size() && live_entry(chain[n], now) != nullptr)
    ++n;
  return n;
}

status prefix_index::acquire(const std::vector<block_hash>& chain, std::size_t count,
                             scenario_id scenario, std::vector<std::int64_t>& block_ids) {
  if (count > chain.size()) {
    return error(errc::invalid_argument, "acquire of " + std::to_string(count) +
                                             " blocks from a chain of " +
                                             std::to_string(chain.size()));
  }
  if (scenario >= retention_.size()) {
    return error(errc::invalid_argument,
                 "acquire with unknown scenario id " + std::to_string(scenario));
  }
  const time_ns now = clock_.now();
  for (std::size_t i = 0; i < count; ++i) {
    if (live_entry(chain[i], now) == nullptr) {
      return error(errc::not_found, "block " + std::to_string(i) +
                                        " of the chain is not cached (evicted or expired): "
                                        "acquire only what match() reported");
    }
  }
  const time_ns expiry_ns = now + retention_.period_ns(scenario);
  for (std::size_t i = 0; i < count; ++i) {
    entry& e = entries_.find(chain[i])->second;
    pin(e);
    e.last_access_ns = now;
    if (expiry_ns > e.expiry_ns) e.scenario = scenario;
    extend_expiry(e, expiry_ns);
    block_ids.push_back(e.block_id);
  }
  return ok_status();
}

result<insert_outcome> prefix_index::insert(const std::vector<block_hash>& chain,
                                            std::size_t position, std::int64_t block_id,
                                            scenario_id scenario,
                                            std::vector<removed_block>& removed) {
  if (position >= chain.size() || scenario >= retention_.size()) {
    return error(errc::invalid_argument, "insert at position " + std::to_string(position) +
                                             " of a chain of " + std::to_string(chain.size()) +
                                             " with scenario id " + std::to_string(scenario));
  }
  entry* parent = position > 0 ? find_entry(chain[position - 1]) : nullptr;
  if (position > 0 && (parent == nullptr || parent->refcount <= 0)) {
    return error(errc::invalid_argument,
                 "insert of block " + std::to_string(position) +
                     ": its parent is not held by the caller; acquire or insert the prefix first");
  }
  const time_ns now = clock_.now();
  time_ns expiry_ns = now + retention_.period_ns(scenario);
  // A child never outlives its parent, or it would expire unreachable.
  if (parent != nullptr) expiry_ns = std::min(expiry_ns, parent->expiry_ns);

  if (entry* existing = find_entry(chain[position])) {
    pin(*existing);
    existing->last_access_ns = now;
    if (expiry_ns > existing->expiry_ns) existing->scenario = scenario;
    extend_expiry(*existing, expiry_ns);
    return insert_outcome{existing->block_id, false};
  }
  if (entries_.size() >= capacity_blocks_) {
    if (lru_head_ == nullptr) {
      return error(errc::resource_exhausted, "prefix index full: all " +
                                                 std::to_string(entries_.size()) +
                                                 " cached blocks are in use by running requests");
    }
    remove(*lru_head_, removed);
  }
  entry& e = entries_[chain[position]];
  e.hash = chain[position];
  e.parent = position > 0 ? chain[position - 1] : 0;
  e.block_id = block_id;
  e.last_access_ns = now;
  e.expiry_ns = expiry_ns;
  e.refcount = 1;
  e.depth = static_cast<std::uint32_t>(position);
  e.scenario = scenario;
  if (parent != nullptr) {
    ++parent->children;
    ++parent->pinned_children;
  }
  return insert_outcome{block_id, true};
}

status prefix_index::check_release(const std::vector<block_hash>& chain, std::size_t count) const {
  if (count > chain.size()) {
    return error(errc::invalid_argument, "release of " + std::to_string(count) +
                                             " blocks from a chain of " +
                                             std::to_string(chain.size()));
  }
  bool child_unpins = false;
  for (std::size_t i = count; i-- > 0;) {
    auto it = entries_.find(chain[i]);
    if (it == entries_.end() || it->second.refcount <= 0 || it->second.depth != i) {
      return error(errc::invalid_argument, "release of block " + std::to_string(i) +
                                               ": it is not cached at that depth or not held");
    }
    const entry& e = it->second;
    const std::uint32_t pinned_after = e.pinned_children - (child_unpins ? 1 : 0);
    child_unpins = e.refcount == 1;
    if (child_unpins && pinned_after > 0) {
      return error(errc::invalid_argument,
                   "release of block " + std::to_string(i) +
                       " would unpin it under a pinned child: release the whole prefix you hold");
    }
  }
  return ok_status();
}

status prefix_index::release(const std::vector<block_hash>& chain, std::size_t count) {
  if (status s = check_release(chain, count); !s) return s;
  for (std::size_t i = count; i-- > 0;)
    unpin(entries_.find(chain[i])->second);
  return ok_status();
}

std::size_t prefix_index::evict(std::size_t count, std::vector<removed_block>& removed) {
  std::size_t n = 0;
  while (n < count && lru_head_ != nullptr) {
    remove(*lru_head_, removed);
    ++n;
  }
  return n;
}

std::size_t prefix_index::expire(std::vector<removed_block>& removed) {
  const time_ns now = clock_.now();
  std::size_t n = 0;
  while (!by_expiry_.empty() && by_expiry_.begin()->expiry_ns <= now) {
    remove(entries_.find(by_expiry_.begin()->hash)->second, removed);
    ++n;
  }
  return n;
}

void prefix_index::pin(entry& e) {
  if (e.refcount++ > 0) return;
  // Leaving the unreferenced set: out of the LRU list and the expiry order.
  (e.lru_prev ? e.lru_prev->lru_next : lru_head_) = e.lru_next;
  (e.lru_next ? e.lru_next->lru_prev : lru_tail_) = e.lru_prev;
  e.lru_prev = e.lru_next = nullptr;
  by_expiry_.erase(expiry_key{e.expiry_ns, e.depth, e.hash});
  --unreferenced_;
  if (e.depth > 0) ++find_entry(e.parent)->pinned_children;
}

void prefix_index::unpin(entry& e) {
  assert(e.refcount > 0);
  if (--e.refcount > 0) return;
  // The most recently used end: release order is use order, deepest block first.
  e.lru_prev = lru_tail_;
  e.lru_next = nullptr;
  (lru_tail_ ? lru_tail_->lru_next : lru_head_) = &e;
  lru_tail_ = &e;
  by_expiry_.insert(expiry_key{e.expiry_ns, e.depth, e.hash});
  ++unreferenced_;
  if (e.depth > 0) --find_entry(e.parent)->pinned_children;
}

void prefix_index::extend_expiry(entry& e, time_ns expiry_ns) {
  if (expiry_ns <= e.expiry_ns) return;
  if (e.refcount == 0) {
    by_expiry_.erase(expiry_key{e.expiry_ns, e.depth, e.hash});
    by_expiry_.insert(expiry_key{expiry_ns, e.depth, e.hash});
  }
  e.expiry_ns = expiry_ns;
}

void prefix_index::remove(entry& e, std::vector<removed_block>& removed) {
  // Only unreferenced leaves leave; the ordering invariants in the header guarantee that the
  // entries eviction and expiry pick are such leaves.
  assert(e.refcount == 0 && e.children == 0);
  (e.lru_prev ? e.lru_prev->lru_next : lru_head_) = e.lru_next;
  (e.lru_next ? e.lru_next->lru_prev : lru_tail_) = e.lru_prev;
  by_expiry_.erase(expiry_key{e.expiry_ns, e.depth, e.hash});
  --unreferenced_;
  if (e.depth > 0) --find_entry(e.parent)->children;
  removed.push_back(removed_block{e.hash, e.block_id});
  entries_.erase(e.hash);
}

std::optional<entry_info> prefix_index::find(block_hash hash) const {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return std::nullopt;
  const entry& e = it->second;
  return entry_info{e.block_id, e.refcount,       e.children, e.depth,
                    e.scenario, e.last_access_ns, e.expiry_ns};
}

status prefix_index::check_entry(const entry& e) const {
  const std::string name =
      "entry " + std::to_string(e.hash) + " (depth " + std::to_string(e.depth) + ")";
  if (e.refcount < 0) return error(errc::internal, name + " has a negative reference count");
  if (e.pinned_children > e.children) {
    return error(errc::internal, name + " has more pinned children than children");
  }
  if (e.refcount == 0 && e.pinned_children > 0) {
    return error(errc::internal, name + " is unreferenced under a referenced child");
  }
  const bool listed = e.lru_prev != nullptr || lru_head_ == &e;
  const bool in_expiry = by_expiry_.count(expiry_key{e.expiry_ns, e.depth, e.hash}) == 1;
  if (listed != (e.refcount == 0) || in_expiry != (e.refcount == 0)) {
    return error(errc::internal, name + " is in the LRU list or expiry order wrongly");
  }
  if (e.depth == 0) return ok_status();
  auto parent = entries_.find(e.parent);
  if (parent == entries_.end() || parent->second.depth + 1 != e.depth) {
    return error(errc::internal, name + " is cached without its parent");
  }
  if (e.expiry_ns > parent->second.expiry_ns) {
    return error(errc::internal, name + " expires after its parent");
  }
  return ok_status();
}

status prefix_index::check_invariants() const {
  if (entries_.size() > capacity_blocks_) {
    return error(errc::internal, "the index holds more entries than its capacity");
  }
  std::unordered_map<block_hash, std::uint32_t, identity_hash> children;
  std::unordered_map<block_hash, std::uint32_t, identity_hash> pinned;
  std::size_t unreferenced = 0;
  for (const auto& [hash, e] : entries_) {
    if (status s = check_entry(e); !s) return s;
    if (e.refcount == 0) ++unreferenced;
    if (e.depth == 0) continue;
    ++children[e.parent];
    if (e.refcount > 0) ++pinned[e.parent];
  }
  for (const auto& [hash, e] : entries_) {
    const auto c = children.find(hash);
    const auto p = pinned.find(hash);
    if ((c == children.end() ? 0 : c->second) != e.children ||
        (p == pinned.end() ? 0 : p->second) != e.pinned_children) {
      return error(errc::internal, "entry " + std::to_string(hash) + " miscounts its children");
    }
  }
  if (unreferenced != unreferenced_ || by_expiry_.size() != unreferenced_) {
    return error(errc::internal, "the unreferenced count disagrees with the entries");
  }
  // Walking the LRU list from the least recent end, a parent must come after its children.
  std::unordered_map<block_hash, std::size_t, identity_hash> position;
  std::size_t listed = 0;
  for (const entry* e = lru_head_; e != nullptr; e = e->lru_next)
    position[e->hash] = listed++;
  if (listed != unreferenced_) return error(errc::internal, "the LRU list length is wrong");
  for (const auto& [hash, pos] : position) {
    const entry& e = entries_.at(hash);
    if (e.depth > 0 && position.count(e.parent) && position.at(e.parent) < pos) {
      return error(errc::internal, "entry " + std::to_string(hash) +
                                       " is more recent than its parent in the LRU list");
    }
  }
  return ok_status();
}

}  // namespace brigade::kvcache

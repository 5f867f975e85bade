#include "kvcache/prefix_index.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

namespace brigade::kvcache {

struct prefix_index::entry {
  block_hash hash;
  /// The block before this one; null at depth 0. A parent outlives its children, and map nodes
  /// never move, so the pointer stays valid.
  entry* parent = nullptr;
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
  /// Requests that used the block (see count_use).
  std::uint32_t uses = 0;
  /// Which segment holds the entry while it is unreferenced.
  bool is_protected = false;
  entry* lru_prev = nullptr;
  entry* lru_next = nullptr;
};

void prefix_index::segment::push_back(entry& e) {
  e.lru_prev = tail;
  e.lru_next = nullptr;
  (tail ? tail->lru_next : head) = &e;
  tail = &e;
  ++size;
}

void prefix_index::segment::erase(entry& e) {
  (e.lru_prev ? e.lru_prev->lru_next : head) = e.lru_next;
  (e.lru_next ? e.lru_next->lru_prev : tail) = e.lru_prev;
  e.lru_prev = e.lru_next = nullptr;
  --size;
}

namespace {

/// The heap order: std::push_heap keeps the greatest on top, so "greater" means "expires
/// later"; among equal expiries the deeper block comes out first.
template <class Item>
bool expires_later(const Item& a, const Item& b) {
  if (a.expiry_ns != b.expiry_ns) return a.expiry_ns > b.expiry_ns;
  return a.depth < b.depth;
}

/// Heap items allowed beyond twice the unreferenced entries before a rebuild.
constexpr std::size_t expiry_heap_slack = 64;

/// Uses that make an entry protected. On the conversation trace (docs/kvcache.md), a block idle
/// for as long as LRU keeps it is about as likely to be used again after one, two or three uses
/// as after one; after four, twice as likely. Protecting blocks with fewer uses spends capacity
/// on blocks no better than the rest.
constexpr std::uint32_t protected_uses = 4;

/// The protected segment's bound, as a fraction of the capacity: 1 / protected_share_inverse.
constexpr std::size_t protected_share_inverse = 20;

}  // namespace

prefix_index::prefix_index(std::size_t capacity_blocks, const clock& clk, const retention& policy)
    : capacity_blocks_(capacity_blocks),
      clock_(clk),
      retention_(policy),
      protected_capacity_(capacity_blocks / protected_share_inverse) {}

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
  if (count > chain.size() || scenario >= retention_.size()) {
    return error(errc::invalid_argument, "acquire of " + std::to_string(count) +
                                             " blocks from a chain of " +
                                             std::to_string(chain.size()) + " with scenario id " +
                                             std::to_string(scenario));
  }
  const time_ns now = clock_.now();
  scratch_.clear();
  for (std::size_t i = 0; i < count; ++i) {
    const entry* e = live_entry(chain[i], now);
    if (e == nullptr) {
      return error(errc::not_found, "block " + std::to_string(i) +
                                        " of the chain is not cached (evicted or expired): "
                                        "acquire only what match() reported");
    }
    scratch_.push_back(const_cast<entry*>(e));
  }
  // The whole prefix gets the same expiry, so no block expires after its parent.
  const time_ns expiry_ns = now + retention_.period_ns(scenario);
  for (entry* e : scratch_) {
    pin(*e);
    count_use(*e);
    e->last_access_ns = now;
    if (expiry_ns > e->expiry_ns) {
      e->expiry_ns = expiry_ns;
      e->scenario = scenario;
    }
    block_ids.push_back(e->block_id);
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
    count_use(*existing);
    existing->last_access_ns = now;
    if (expiry_ns > existing->expiry_ns) {
      existing->expiry_ns = expiry_ns;
      existing->scenario = scenario;
    }
    return insert_outcome{existing->block_id, false};
  }
  if (entries_.size() >= capacity_blocks_) {
    entry* evicted = victim();
    if (evicted == nullptr) {
      return error(errc::resource_exhausted, "prefix index full: all " +
                                                 std::to_string(entries_.size()) +
                                                 " cached blocks are in use by running requests");
    }
    remove(*evicted, removed);
  }
  entry& e = entries_[chain[position]];
  e.hash = chain[position];
  e.parent = parent;
  e.block_id = block_id;
  e.last_access_ns = now;
  e.expiry_ns = expiry_ns;
  e.refcount = 1;
  e.depth = static_cast<std::uint32_t>(position);
  e.scenario = scenario;
  e.uses = 1;
  if (parent != nullptr) {
    ++parent->children;
    ++parent->pinned_children;
  }
  return insert_outcome{block_id, true};
}

status prefix_index::check_release(const std::vector<block_hash>& chain, std::size_t count) {
  if (count > chain.size()) {
    return error(errc::invalid_argument, "release of " + std::to_string(count) +
                                             " blocks from a chain of " +
                                             std::to_string(chain.size()));
  }
  scratch_.assign(count, nullptr);
  bool child_unpins = false;
  for (std::size_t i = count; i-- > 0;) {
    entry* e = find_entry(chain[i]);
    if (e == nullptr || e->refcount <= 0 || e->depth != i) {
      return error(errc::invalid_argument, "release of block " + std::to_string(i) +
                                               ": it is not cached at that depth or not held");
    }
    const std::uint32_t pinned_after = e->pinned_children - (child_unpins ? 1 : 0);
    child_unpins = e->refcount == 1;
    if (child_unpins && pinned_after > 0) {
      return error(errc::invalid_argument,
                   "release of block " + std::to_string(i) +
                       " would unpin it under a pinned child: release the whole prefix you hold");
    }
    scratch_[i] = e;
  }
  return ok_status();
}

status prefix_index::release(const std::vector<block_hash>& chain, std::size_t count) {
  if (status s = check_release(chain, count); !s) return s;
  for (std::size_t i = count; i-- > 0;)
    unpin(*scratch_[i]);
  return ok_status();
}

std::size_t prefix_index::evict(std::size_t count, std::vector<removed_block>& removed) {
  std::size_t n = 0;
  for (entry* e = victim(); n < count && e != nullptr; e = victim()) {
    remove(*e, removed);
    ++n;
  }
  return n;
}

std::size_t prefix_index::expire(std::vector<removed_block>& removed) {
  const time_ns now = clock_.now();
  const auto later = expires_later<expiry_item>;
  std::size_t n = 0;
  while (!expiry_heap_.empty() && expiry_heap_.front().expiry_ns <= now) {
    const expiry_item item = expiry_heap_.front();
    std::pop_heap(expiry_heap_.begin(), expiry_heap_.end(), later);
    expiry_heap_.pop_back();
    entry* e = find_entry(item.hash);
    // Skip stale items: the entry is gone, pinned again, or its expiry moved since.
    if (e == nullptr || e->refcount > 0 || e->expiry_ns != item.expiry_ns) continue;
    remove(*e, removed);
    ++n;
  }
  return n;
}

void prefix_index::count_use(entry& e) {
  // Capped at the parent's count, which the same request raised just before (acquire goes
  // shallowest first; insert needs the parent held): a parent is then protected whenever its
  // child is, even if an owner inserts one block twice.
  const std::uint32_t cap =
      e.parent != nullptr ? e.parent->uses : std::numeric_limits<std::uint32_t>::max();
  if (e.uses < cap) ++e.uses;
}

void prefix_index::pin(entry& e) {
  if (e.refcount++ > 0) return;
  // Leaving the unreferenced set: out of its segment; its heap item goes stale.
  (e.is_protected ? protected_ : probation_).erase(e);
  e.is_protected = false;
  --unreferenced_;
  if (e.parent != nullptr) ++e.parent->pinned_children;
  compact_expiry_heap();
}

void prefix_index::unpin(entry& e) {
  assert(e.refcount > 0);
  if (--e.refcount > 0) return;
  // The most recently used end: release order is use order, deepest block first.
  if (e.uses >= protected_uses && protected_capacity_ > 0) {
    e.is_protected = true;
    protected_.push_back(e);
    while (protected_.size > protected_capacity_) {
      // Least recent first, so a demoted parent follows its demoted children.
      entry& demoted = *protected_.head;
      protected_.erase(demoted);
      demoted.is_protected = false;
      probation_.push_back(demoted);
    }
  } else {
    probation_.push_back(e);
  }
  ++unreferenced_;
  if (e.parent != nullptr) --e.parent->pinned_children;
  push_expiry(e);
}

prefix_index::entry* prefix_index::victim() const {
  return probation_.head != nullptr ? probation_.head : protected_.head;
}

void prefix_index::push_expiry(const entry& e) {
  const auto later = expires_later<expiry_item>;
  expiry_heap_.push_back(expiry_item{e.expiry_ns, e.depth, e.hash});
  std::push_heap(expiry_heap_.begin(), expiry_heap_.end(), later);
  compact_expiry_heap();
}

void prefix_index::compact_expiry_heap() {
  // Rebuilding costs O(unreferenced) and happens only after that many items went stale (pins,
  // removals and pushes each add at most two to the gap), so it is O(1) amortized.
  if (expiry_heap_.size() < 2 * unreferenced_ + expiry_heap_slack) return;
  expiry_heap_.clear();
  for (const segment* s : {&probation_, &protected_}) {
    for (const entry* u = s->head; u != nullptr; u = u->lru_next)
      expiry_heap_.push_back(expiry_item{u->expiry_ns, u->depth, u->hash});
  }
  std::make_heap(expiry_heap_.begin(), expiry_heap_.end(), expires_later<expiry_item>);
}

void prefix_index::remove(entry& e, std::vector<removed_block>& removed) {
  // Only unreferenced leaves leave; the ordering invariants in the header guarantee that the
  // entries eviction and expiry pick are such leaves.
  assert(e.refcount == 0 && e.children == 0);
  (e.is_protected ? protected_ : probation_).erase(e);
  --unreferenced_;
  if (e.parent != nullptr) --e.parent->children;
  removed.push_back(removed_block{e.hash, e.block_id, e.scenario});
  entries_.erase(e.hash);
  compact_expiry_heap();
}

std::optional<entry_info> prefix_index::find(block_hash hash) const {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return std::nullopt;
  const entry& e = it->second;
  return entry_info{e.block_id,       e.refcount,  e.children, e.depth,       e.scenario,
                    e.last_access_ns, e.expiry_ns, e.uses,     e.is_protected};
}

status prefix_index::check_entry(const entry& e) const {
  const std::string name = "entry " + to_hex(e.hash) + " (depth " + std::to_string(e.depth) + ")";
  if (e.refcount < 0) return error(errc::internal, name + " has a negative reference count");
  if (e.pinned_children > e.children) {
    return error(errc::internal, name + " has more pinned children than children");
  }
  if (e.refcount == 0 && e.pinned_children > 0) {
    return error(errc::internal, name + " is unreferenced under a referenced child");
  }
  const bool listed = e.lru_prev != nullptr || probation_.head == &e || protected_.head == &e;
  if (listed != (e.refcount == 0)) {
    return error(errc::internal, name + " is in an eviction segment wrongly");
  }
  if (e.uses == 0) return error(errc::internal, name + " counts no use");
  if (e.depth == 0) {
    if (e.parent != nullptr) return error(errc::internal, name + " has a parent at depth 0");
    return ok_status();
  }
  auto parent = e.parent != nullptr ? entries_.find(e.parent->hash) : entries_.end();
  if (parent == entries_.end() || &parent->second != e.parent || e.parent->depth + 1 != e.depth) {
    return error(errc::internal, name + " is cached without its parent");
  }
  if (e.expiry_ns > e.parent->expiry_ns) {
    return error(errc::internal, name + " expires after its parent");
  }
  if (e.uses > e.parent->uses)
    return error(errc::internal, name + " has more uses than its parent");
  return ok_status();
}

status prefix_index::check_expiry_heap() const {
  if (expiry_heap_.size() >= 2 * unreferenced_ + expiry_heap_slack) {
    return error(errc::internal, "the expiry heap outgrew its bound");
  }
  if (!std::is_heap(expiry_heap_.begin(), expiry_heap_.end(), expires_later<expiry_item>)) {
    return error(errc::internal, "the expiry heap is out of order");
  }
  // Every unreferenced entry needs an item carrying its current expiry, or it would never expire.
  std::unordered_set<block_hash> timed;
  for (const auto& item : expiry_heap_) {
    auto it = entries_.find(item.hash);
    if (it != entries_.end() && it->second.expiry_ns == item.expiry_ns) timed.insert(item.hash);
  }
  for (const segment* s : {&probation_, &protected_}) {
    for (const entry* e = s->head; e != nullptr; e = e->lru_next) {
      if (timed.count(e->hash) == 0) {
        return error(errc::internal,
                     "entry " + to_hex(e->hash) + " is missing from the expiry heap");
      }
    }
  }
  return ok_status();
}

status prefix_index::check_segments() const {
  if (protected_.size > protected_capacity_) {
    return error(errc::internal, "the protected segment outgrew its bound");
  }
  // Each listed entry's segment and position from the least recent end.
  std::unordered_map<const entry*, std::pair<const segment*, std::size_t>> position;
  for (const segment* s : {&probation_, &protected_}) {
    std::size_t listed = 0;
    for (const entry* e = s->head; e != nullptr; e = e->lru_next) {
      if (e->is_protected != (s == &protected_)) {
        return error(errc::internal,
                     "entry " + to_hex(e->hash) + " is flagged for the other segment");
      }
      position[e] = {s, listed++};
    }
    if (listed != s->size) return error(errc::internal, "a segment's length is wrong");
  }
  if (position.size() != unreferenced_) {
    return error(errc::internal, "the segments do not hold exactly the unreferenced entries");
  }
  // A parent comes after its children in their segment, and is not in probation under a
  // protected child: then the least recent entry of each segment is a leaf.
  for (const auto& [e, where] : position) {
    const auto parent = e->parent != nullptr ? position.find(e->parent) : position.end();
    if (parent == position.end()) continue;
    const bool behind = parent->second.first == where.first && parent->second.second < where.second;
    if (behind || (e->is_protected && !e->parent->is_protected)) {
      return error(errc::internal,
                   "entry " + to_hex(e->hash) + " would be evicted after its parent");
    }
  }
  return ok_status();
}

status prefix_index::check_invariants() const {
  if (entries_.size() > capacity_blocks_) {
    return error(errc::internal, "the index holds more entries than its capacity");
  }
  std::unordered_map<block_hash, std::uint32_t> children;
  std::unordered_map<block_hash, std::uint32_t> pinned;
  std::size_t unreferenced = 0;
  for (const auto& [hash, e] : entries_) {
    if (status s = check_entry(e); !s) return s;
    if (e.refcount == 0) ++unreferenced;
    if (e.parent == nullptr) continue;
    ++children[e.parent->hash];
    if (e.refcount > 0) ++pinned[e.parent->hash];
  }
  for (const auto& [hash, e] : entries_) {
    const auto c = children.find(hash);
    const auto p = pinned.find(hash);
    if ((c == children.end() ? 0 : c->second) != e.children ||
        (p == pinned.end() ? 0 : p->second) != e.pinned_children) {
      return error(errc::internal, "entry " + to_hex(hash) + " miscounts its children");
    }
  }
  if (unreferenced != unreferenced_) {
    return error(errc::internal, "the unreferenced count disagrees with the entries");
  }
  if (status s = check_expiry_heap(); !s) return s;
  return check_segments();
}

}  // namespace brigade::kvcache

#include "kvcache/prefix_index.hpp"

#include <catch2/catch.hpp>

#include "tests/kvcache/index_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::errc;

namespace {

struct fixture {
  manual_clock clk{1'000'000'000};
  retention policy;
  std::int64_t next_id = 100;
  std::vector<removed_block> removed;
};

}  // namespace

TEST_CASE("match finds the longest cached prefix and stops at the first miss",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(100, f.clk, f.policy);
  const auto abcde = chain_of({1, 2, 3, 4, 5});
  CHECK(serve(index, abcde, f.next_id, f.removed) == 0);
  CHECK(index.size() == 5);
  CHECK(index.match(abcde) == 5);
  CHECK(index.match(chain_of({1, 2, 3, 9, 5})) == 3);
  CHECK(index.match(chain_of({1, 2, 3})) == 3);
  CHECK(index.match(chain_of({9, 2, 3})) == 0);
  CHECK(index.match({}) == 0);
  // A chain whose third hash is cached but whose second is not: lookups stop at the miss.
  auto broken = abcde;
  broken[1] = 12345;
  CHECK(index.match(broken) == 1);
  CHECK(serve(index, chain_of({1, 2, 7, 8}), f.next_id, f.removed) == 2);
  CHECK(index.size() == 7);
  REQUIRE(index.check_invariants());
}

TEST_CASE("acquire pins, insert of a cached hash returns the cached block",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(100, f.clk, f.policy);
  const auto abc = chain_of({1, 2, 3});
  std::vector<std::int64_t> ids;
  REQUIRE(index.insert(abc, 0, 7, retention::chat, f.removed));
  auto again = index.insert(abc, 0, 8, retention::chat, f.removed);
  REQUIRE(again);
  CHECK(again->block_id == 7);
  CHECK_FALSE(again->inserted);
  CHECK(index.find(abc[0])->refcount == 2);
  REQUIRE(index.insert(abc, 1, 9, retention::chat, f.removed));
  REQUIRE(index.acquire(abc, 2, retention::chat, ids));
  CHECK(ids == std::vector<std::int64_t>{7, 9});
  CHECK(index.find(abc[0])->refcount == 3);
  CHECK(index.find(abc[1])->refcount == 2);
  CHECK(index.find(abc[0])->children == 1);
  // Not cached: acquire fails and changes nothing.
  auto missing = index.acquire(abc, 3, retention::chat, ids);
  CHECK(missing.err().code == errc::not_found);
  CHECK(index.find(abc[0])->refcount == 3);
  REQUIRE(index.check_invariants());
}

TEST_CASE("insert needs a held parent and release needs a held prefix", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(100, f.clk, f.policy);
  const auto abc = chain_of({1, 2, 3});
  auto orphan = index.insert(abc, 1, 1, retention::chat, f.removed);
  CHECK(orphan.err().code == errc::invalid_argument);
  CHECK(index.size() == 0);
  CHECK(serve(index, abc, f.next_id, f.removed) == 0);
  // The parent is cached but nobody holds it.
  auto unheld = index.insert(chain_of({1, 2, 3, 4}), 3, 1, retention::chat, f.removed);
  CHECK(unheld.err().code == errc::invalid_argument);
  CHECK(index.release(abc, 1).err().code == errc::invalid_argument);

  // Two requests: one holds [a, b, c], the other [a]. Releasing [a] from the first would leave
  // b pinned under an unpinned a only if a's last reference went; here it does not.
  std::vector<std::int64_t> ids;
  REQUIRE(index.acquire(abc, 3, retention::chat, ids));
  REQUIRE(index.acquire(abc, 1, retention::chat, ids));
  CHECK(index.release(abc, 1));
  // Now a has one reference left, held by the request that also pins b and c: releasing [a]
  // alone would unpin a under its pinned child b.
  auto bad = index.release(abc, 1);
  CHECK(bad.err().code == errc::invalid_argument);
  CHECK(index.find(abc[0])->refcount == 1);
  CHECK(index.release(abc, 3));
  CHECK(index.referenced() == 0);
  REQUIRE(index.check_invariants());
}

TEST_CASE("LRU eviction within probation: least recently released first, deepest block first",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(6, f.clk, f.policy);
  const auto a = chain_of({1, 2, 3});
  const auto b = chain_of({1, 5});
  const auto c = chain_of({6, 7});
  serve(index, a, f.next_id, f.removed);  // list: a2 a1 a0
  serve(index, c, f.next_id, f.removed);  // list: a2 a1 a0 c1 c0
  serve(index, b, f.next_id, f.removed);  // a0 is used again: a2 a1 c1 c0 b1 a0
  REQUIRE(index.size() == 6);
  REQUIRE(f.removed.empty());
  std::vector<removed_block> evicted;
  CHECK(index.evict(6, evicted) == 6);
  CHECK(hashes_of(evicted) == std::vector<block_hash>{a[2], a[1], c[1], c[0], b[1], a[0]});
  CHECK(index.size() == 0);
  REQUIRE(index.check_invariants());
}

TEST_CASE("inserting at capacity evicts the least recently used leaf", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(3, f.clk, f.policy);
  const auto a = chain_of({1, 2, 3});
  const auto b = chain_of({1, 4, 5});
  serve(index, a, f.next_id, f.removed);
  // b shares a0; its two new blocks need room: a2 goes, then a1 (a0 is pinned by b).
  CHECK(serve(index, b, f.next_id, f.removed) == 1);
  CHECK(hashes_of(f.removed) == std::vector<block_hash>{a[2], a[1]});
  CHECK(index.match(a) == 1);
  CHECK(index.match(b) == 3);
  REQUIRE(index.check_invariants());
}

TEST_CASE("referenced blocks are never evicted", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(3, f.clk, f.policy);
  const auto a = chain_of({1, 2, 3});
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(index.insert(a, i, 10 + i, retention::chat, f.removed));
  // Everything is pinned: no room, and evict finds nothing to take.
  auto full = index.insert(chain_of({4}), 0, 20, retention::chat, f.removed);
  CHECK(full.err().code == errc::resource_exhausted);
  CHECK(index.evict(10, f.removed) == 0);
  CHECK(f.removed.empty());
  CHECK(index.referenced() == 3);
  // Unpinning frees them for eviction, leaf first.
  REQUIRE(index.release(a, 3));
  CHECK(index.evictable() == 3);
  REQUIRE(index.insert(chain_of({4}), 0, 20, retention::chat, f.removed));
  CHECK(hashes_of(f.removed) == std::vector<block_hash>{a[2]});
  REQUIRE(index.check_invariants());
}

TEST_CASE("a parent with a cached child is not evicted before it", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(100, f.clk, f.policy);
  const auto a = chain_of({1, 2});
  const auto b = chain_of({1, 3});
  serve(index, a, f.next_id, f.removed);
  serve(index, b, f.next_id, f.removed);
  // a0 is the parent of both a1 and b1: it leaves last.
  std::vector<removed_block> evicted;
  index.evict(3, evicted);
  CHECK(hashes_of(evicted) == std::vector<block_hash>{a[1], b[1], a[0]});
}

TEST_CASE("a zero-capacity index caches nothing", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(0, f.clk, f.policy);
  const auto a = chain_of({1, 2});
  CHECK(serve(index, a, f.next_id, f.removed) == 0);
  CHECK(serve(index, a, f.next_id, f.removed) == 0);
  CHECK(index.size() == 0);
}

namespace {

/// Serves `chain` as `times` whole requests, one after another.
void serve_times(prefix_index& index, const std::vector<block_hash>& chain, int times, fixture& f) {
  for (int i = 0; i < times; ++i)
    REQUIRE(serve(index, chain, f.next_id, f.removed) != static_cast<std::size_t>(-1));
}

}  // namespace

TEST_CASE("a block used by four requests outlives newer blocks used fewer times",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(40, f.clk, f.policy);
  REQUIRE(index.protected_capacity() == 2);
  const auto shared = chain_of({1});
  const auto thrice = chain_of({2});
  serve_times(index, shared, 4, f);
  serve_times(index, thrice, 3, f);
  CHECK(index.find(shared[0])->uses == 4);
  CHECK(index.find(shared[0])->is_protected);
  CHECK_FALSE(index.find(thrice[0])->is_protected);
  // Forty newer one-block prompts, each used once, pass through the full cache. LRU would take
  // the shared block first; here the block used three times goes first and the shared one stays.
  for (std::int32_t t = 100; t < 140; ++t)
    serve_times(index, chain_of({t}), 1, f);
  CHECK(index.match(shared) == 1);
  CHECK(index.match(thrice) == 0);
  CHECK(f.removed.front().hash == thrice[0]);
  CHECK(index.size() == 40);
  REQUIRE(index.check_invariants());
}

TEST_CASE("the protected segment is bounded: its least recent entry moves to probation",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(40, f.clk, f.policy);
  const auto p1 = chain_of({1});
  const auto p2 = chain_of({2});
  const auto p3 = chain_of({3});
  serve_times(index, p1, 4, f);
  serve_times(index, p2, 4, f);
  CHECK(index.protected_size() == 2);
  // p3 overflows the two protected slots: p1, the least recent there, goes to probation.
  serve_times(index, p3, 4, f);
  CHECK(index.protected_size() == 2);
  CHECK_FALSE(index.find(p1[0])->is_protected);
  CHECK(index.find(p2[0])->is_protected);
  CHECK(index.find(p3[0])->is_protected);
  const auto n1 = chain_of({4});
  const auto n2 = chain_of({5});
  serve_times(index, n1, 1, f);
  serve_times(index, n2, 1, f);
  // Probation first, least recent first (p1 entered it before n1 and n2), then protected.
  std::vector<removed_block> evicted;
  CHECK(index.evict(5, evicted) == 5);
  CHECK(hashes_of(evicted) == std::vector<block_hash>{p1[0], n1[0], n2[0], p2[0], p3[0]});
  REQUIRE(index.check_invariants());
}

TEST_CASE("protected chains are still evicted leaf first", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(40, f.clk, f.policy);
  const auto abc = chain_of({1, 2, 3});
  const auto abcd = chain_of({1, 2, 3, 4});
  const auto abx = chain_of({1, 2, 9});
  serve_times(index, abc, 4, f);
  // Released c, b, a: c and b filled the two protected slots, a pushed c out to probation.
  CHECK_FALSE(index.find(abc[2])->is_protected);
  CHECK(index.find(abc[1])->is_protected);
  CHECK(index.find(abc[0])->is_protected);
  serve_times(index, abcd, 1, f);
  serve_times(index, abx, 2, f);
  REQUIRE(index.check_invariants());
  // Whatever the segments hold, each eviction takes a leaf: no cached block loses its parent.
  std::vector<removed_block> evicted;
  while (index.evict(1, evicted) == 1)
    REQUIRE(index.check_invariants());
  CHECK(evicted.size() == 5);
  CHECK(evicted.back().hash == abc[0]);
}

TEST_CASE("referenced blocks leave the protected segment and are never evicted",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(40, f.clk, f.policy);
  const auto ab = chain_of({1, 2});
  serve_times(index, ab, 4, f);
  REQUIRE(index.protected_size() == 2);
  std::vector<std::int64_t> ids;
  REQUIRE(index.acquire(ab, 2, retention::chat, ids));
  CHECK(index.protected_size() == 0);
  CHECK_FALSE(index.find(ab[0])->is_protected);
  CHECK(index.evict(10, f.removed) == 0);
  REQUIRE(index.release(ab, 2));
  CHECK(index.protected_size() == 2);
  CHECK(index.find(ab[1])->uses == 5);
  REQUIRE(index.check_invariants());
}

TEST_CASE("a block never counts more uses than its parent", "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(40, f.clk, f.policy);
  const auto ab = chain_of({1, 2});
  REQUIRE(index.insert(ab, 0, 1, retention::chat, f.removed));
  REQUIRE(index.insert(ab, 1, 2, retention::chat, f.removed));
  // The same holder of a inserts b again: b gains a reference but not a use, so b can never be
  // protected while a is not.
  auto again = index.insert(ab, 1, 3, retention::chat, f.removed);
  REQUIRE(again);
  CHECK_FALSE(again->inserted);
  CHECK(index.find(ab[1])->refcount == 2);
  CHECK(index.find(ab[1])->uses == 1);
  REQUIRE(index.check_invariants());
}

TEST_CASE("below twenty blocks of capacity there is no protected segment",
          "[kvcache][prefix_index]") {
  fixture f;
  prefix_index index(19, f.clk, f.policy);
  CHECK(index.protected_capacity() == 0);
  const auto shared = chain_of({1});
  serve_times(index, shared, 5, f);
  CHECK_FALSE(index.find(shared[0])->is_protected);
  for (std::int32_t t = 100; t < 119; ++t)
    serve_times(index, chain_of({t}), 1, f);
  // Plain LRU: the shared block was the least recently used.
  CHECK(index.match(shared) == 0);
  REQUIRE(index.check_invariants());
}

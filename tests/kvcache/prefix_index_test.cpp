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

TEST_CASE("LRU eviction: least recently released first, deepest block first",
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

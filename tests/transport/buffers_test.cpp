// Payload storage: shared byte buffers, the small-payload arena, and the UCX registration cache.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>

#include "transport/payload_arena.hpp"
#include "transport/registration_cache.hpp"
#include "transport/transport_config.hpp"
#include "transport/ucx_worker.hpp"

using namespace brigade;
using namespace brigade::transport;

TEST_CASE("a slice shares its buffer's owner", "[transport][buffers]") {
  byte_buffer whole = byte_buffer::allocate(100);
  for (int i = 0; i < 100; ++i)
    whole.data()[i] = static_cast<std::byte>(i);
  byte_buffer part = whole.slice(10, 20);
  CHECK(part.size() == 20);
  CHECK(part.data() == whole.data() + 10);
  CHECK(static_cast<int>(part.data()[0]) == 10);
  std::weak_ptr<std::byte> watch = whole.owner();
  whole = byte_buffer();
  CHECK(!watch.expired());  // the slice keeps the bytes alive
  part = byte_buffer();
  CHECK(watch.expired());
}

TEST_CASE("arena slices are aligned, disjoint and freed with their last user",
          "[transport][buffers]") {
  payload_arena arena;
  CHECK(arena.allocate(0).size() == 0);
  std::vector<byte_buffer> slices;
  for (std::size_t bytes : {1, 8, 15, 16, 17, 100, 512}) {
    byte_buffer b = arena.allocate(bytes);
    REQUIRE(b.size() == bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 16 == 0);
    std::memset(b.data(), static_cast<int>(bytes % 251), bytes);
    slices.push_back(b);
  }
  for (const byte_buffer& b : slices) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      CHECK(static_cast<std::size_t>(b.data()[i]) == b.size() % 251);
    }
  }
  std::weak_ptr<std::byte> first_chunk = slices.front().owner();
  // Filling more chunks moves the arena on; the first chunk lives while a slice of it does.
  for (int i = 0; i < 200; ++i)
    arena.allocate(payload_arena::max_slice_bytes);
  CHECK(!first_chunk.expired());
  slices.clear();
  CHECK(first_chunk.expired());
  byte_buffer large = arena.allocate(payload_arena::max_slice_bytes + 1);
  CHECK(large.size() == payload_arena::max_slice_bytes + 1);
}

TEST_CASE("the registration cache registers an allocation once and forgets dead ones",
          "[transport][buffers]") {
  transport_config config;
  config.tls = "tcp";
  config.net_devices = "lo";
  auto worker = ucx_worker::create(config);
  REQUIRE(worker.ok());
  registration_cache cache((*worker)->context(), 2);
  byte_buffer a = byte_buffer::allocate(1 << 20);
  auto first = cache.acquire(a);
  REQUIRE(first.ok());
  auto again = cache.acquire(a.slice(0, 4096));
  REQUIRE(again.ok());
  CHECK(again->get() == first->get());
  CHECK(cache.hits() == 1);
  CHECK(cache.misses() == 1);
  // A slice outside the registered range of the same owner needs its own registration; an
  // equal range of a different owner must never reuse another allocation's handle.
  byte_buffer b = byte_buffer::allocate(1 << 20);
  auto other = cache.acquire(b);
  REQUIRE(other.ok());
  CHECK(other->get() != first->get());
  CHECK(cache.entries() == 2);
  // Bounded: a third allocation evicts the least recently used entry.
  byte_buffer c = byte_buffer::allocate(4096);
  REQUIRE(cache.acquire(c).ok());
  CHECK(cache.entries() == 2);
  // Entries of dead owners are dropped on the next miss, whatever their age.
  b = byte_buffer();
  c = byte_buffer();
  byte_buffer d = byte_buffer::allocate(4096);
  REQUIRE(cache.acquire(d).ok());
  CHECK(cache.entries() == 1);
  // Handles held by in-flight operations outlive eviction.
  CHECK((*first)->handle() != nullptr);
}

#include "common/thread_pool.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <numeric>
#include <thread>
#include <vector>

using brigade::thread_pool;

TEST_CASE("parallel_for visits every index exactly once", "[thread_pool]") {
  thread_pool pool(4);
  for (size_t n : {1u, 7u, 64u, 1000u, 12345u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 3, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i)
        hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i)
      REQUIRE(hits[i].load() == 1);
  }
}

TEST_CASE("parallel_for is safe from several callers at once", "[thread_pool]") {
  thread_pool pool(3);
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        pool.parallel_for(100, 1, [&](size_t b, size_t e) { total += static_cast<long>(e - b); });
      }
    });
  }
  for (auto& t : callers)
    t.join();
  REQUIRE(total.load() == 4L * 200 * 100);
}

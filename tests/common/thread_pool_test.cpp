#include "common/thread_pool.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
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

TEST_CASE("nested calls from more callers than the pool has slots each run every index once",
          "[thread_pool]") {
  // 12 callers, each of whose 16 chunks calls parallel_for again: far more jobs at once than
  // the pool publishes (the rest run on their caller alone), and workers become callers.
  thread_pool pool(4);
  constexpr size_t outer = 16, inner = 8;
  constexpr int callers = 12, rounds = 50;
  std::vector<std::atomic<long>> hits(outer * inner);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&] {
      for (int round = 0; round < rounds; ++round) {
        pool.parallel_for(outer, 1, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) {
            pool.parallel_for(inner, 1, [&](size_t b2, size_t e2) {
              for (size_t k = b2; k < e2; ++k)
                hits[i * inner + k].fetch_add(1);
            });
          }
        });
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& h : hits)
    REQUIRE(h.load() == callers * rounds);
}

namespace {

// Runs a job of two chunks whose first waits until the second has started: it can only finish
// in time if a worker, not the caller alone, picks up the second chunk.
bool second_chunk_ran_on_a_worker(thread_pool& pool) {
  std::atomic<bool> second_started{false};
  std::atomic<bool> met{false};
  pool.parallel_for(2, 1, [&](size_t b, size_t) {
    if (b == 1) {
      second_started = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!second_started && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    met = second_started.load();
  });
  return met.load();
}

}  // namespace

TEST_CASE("a worker takes jobs both while it polls and after it has fallen asleep",
          "[thread_pool]") {
  thread_pool pool(2);
  // Back to back: the worker is still polling from the job before.
  for (int i = 0; i < 100; ++i)
    REQUIRE(second_chunk_ran_on_a_worker(pool));
  // After a pause far past the polling window the worker sleeps on the condition variable.
  const auto pause =
      std::chrono::nanoseconds(thread_pool::spin_nanoseconds()) * 20 + std::chrono::milliseconds(5);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(pause);
    REQUIRE(second_chunk_ran_on_a_worker(pool));
  }
}

TEST_CASE("a pool is destroyed cleanly with its workers polling or asleep", "[thread_pool]") {
  for (int sleep_ms : {0, 5}) {
    std::atomic<long> total{0};
    {
      thread_pool pool(3);
      pool.parallel_for(64, 1, [&](size_t b, size_t e) { total += static_cast<long>(e - b); });
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    }
    REQUIRE(total.load() == 64);
  }
}

TEST_CASE("spin windows lengthen the workers' polling while they live, the longest winning",
          "[thread_pool]") {
  if (std::getenv("BRIGADE_SPIN_US") != nullptr) {
    // The variable decides whatever windows ask for.
    const int64_t forced = thread_pool::spin_nanoseconds();
    thread_pool::spin_window longer(std::chrono::microseconds(700));
    CHECK(thread_pool::spin_nanoseconds() == forced);
    return;
  }
  CHECK(thread_pool::spin_nanoseconds() == 50'000);
  {
    thread_pool::spin_window actors(std::chrono::microseconds(300));
    CHECK(thread_pool::spin_nanoseconds() == 300'000);
    {
      thread_pool::spin_window shorter(std::chrono::microseconds(20));
      CHECK(thread_pool::spin_nanoseconds() == 300'000);
      thread_pool::spin_window longer(std::chrono::microseconds(900));
      CHECK(thread_pool::spin_nanoseconds() == 900'000);
    }
    CHECK(thread_pool::spin_nanoseconds() == 300'000);
    // Jobs run as before under a window.
    thread_pool pool(3);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(hits.size(), 7, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i)
        hits[i].fetch_add(1);
    });
    for (auto& h : hits)
      REQUIRE(h.load() == 1);
  }
  CHECK(thread_pool::spin_nanoseconds() == 50'000);
}

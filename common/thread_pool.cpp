#include "common/thread_pool.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace brigade {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// Polls `ready` until it holds or the spin window has passed; says whether it held. The first
/// microseconds poll with a pause; after that each poll yields the core, so that where threads
/// outnumber cores (expert shards and workers of one process computing side by side) a polling
/// thread gives way to one with work instead of holding its core for the whole window.
template <class Ready>
bool spin_until(Ready&& ready) {
  const int64_t budget = thread_pool::spin_nanoseconds();
  if (budget <= 0) return ready();
  const auto start = std::chrono::steady_clock::now();
  const auto busy_until = start + std::chrono::nanoseconds(std::min<int64_t>(budget, 5'000));
  const auto deadline = start + std::chrono::nanoseconds(budget);
  for (;;) {
    // The clock is read once per 32 polls: a poll is a load and a pause, the clock ~20 ns.
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return ready();
    if (now >= busy_until) std::this_thread::yield();
  }
}

/// One parallel_for call: its chunks, claimed one at a time by whoever runs them.
struct job {
  const std::function<void(size_t, size_t)>* fn = nullptr;
  size_t n = 0;
  size_t chunk = 1;
  size_t chunks = 0;
  std::atomic<size_t> next{0};

  bool has_chunks() const { return next.load(std::memory_order_relaxed) < chunks; }
  /// Runs the next chunk, if any is left; says whether it ran one.
  bool run_one_chunk() {
    const size_t c = next.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks) return false;
    const size_t begin = c * chunk;
    (*fn)(begin, std::min(n, begin + chunk));
    return true;
  }
};

/// Where a caller publishes its job. The pool owns the slots, so a worker may touch a slot at any
/// time; a job, on its caller's stack, only while the slot's `users` counts the worker.
struct alignas(64) slot {
  std::atomic<bool> owned{false};  ///< A caller holds the slot (its job may be gone already).
  std::atomic<job*> current{nullptr};
  std::atomic<int> users{0};  ///< Workers that may be inside `current`.
};

}  // namespace

// The hand-off takes no lock while threads keep polling: a caller claims a free slot, stores its
// job there and bumps `posted`; a polling worker sees `posted` change, counts itself into the
// slot and runs chunks. When the caller has claimed every chunk it clears the slot and waits for
// the slot's users to leave. Both sides use sequentially consistent operations so that a worker
// counted in after the caller saw no users also sees the slot cleared (and never the gone job).
// Locks and condition variables are only for threads that stopped polling and sleep.
struct thread_pool::state {
  static constexpr size_t slot_count = 16;
  std::array<slot, slot_count> slots;
  alignas(64) std::atomic<uint64_t> posted{0};  ///< Counts jobs posted: what polling workers watch.
  alignas(64) std::atomic<int> sleeping_workers{0};
  std::atomic<int> waiting_callers{0};
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wake;      ///< Workers asleep wait here for a job.
  std::condition_variable finished;  ///< Callers wait here for workers still inside their job.
  std::vector<std::thread> workers;

  /// Leaves slot `s`; wakes a caller that sleeps until its slot's workers have left.
  void leave(slot& s) {
    s.users.fetch_sub(1);
    if (waiting_callers.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex);
      finished.notify_all();
    }
  }

  /// Whether a posted job has chunks nobody claimed yet. Called with `mutex` held (a leaving
  /// worker's notification then waits for the lock, which is ours and is not recursive: so the
  /// slots are left without it).
  bool any_job_open() {
    bool open = false;
    for (slot& s : slots) {
      if (s.current.load(std::memory_order_relaxed) == nullptr) continue;
      s.users.fetch_add(1);
      const job* j = s.current.load();
      open = open || (j != nullptr && j->has_chunks());
      s.users.fetch_sub(1);
    }
    if (waiting_callers.load() > 0) finished.notify_all();
    return open;
  }

  /// Runs chunks of any posted job; says whether it found one.
  bool work_on_posted() {
    bool found = false;
    for (slot& s : slots) {
      if (s.current.load(std::memory_order_relaxed) == nullptr) continue;
      s.users.fetch_add(1);
      if (job* j = s.current.load()) {
        while (j->run_one_chunk())
          found = true;
      }
      leave(s);
    }
    return found;
  }

  void worker_loop() {
    uint64_t seen = posted.load();
    for (;;) {
      if (stopping.load()) return;
      if (work_on_posted()) continue;
      // Nothing to do: poll for the next job for a while, then sleep.
      if (spin_until([&] { return posted.load(std::memory_order_acquire) != seen; })) {
        seen = posted.load();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex);
      sleeping_workers.fetch_add(1);
      wake.wait(lock, [&] { return stopping.load() || any_job_open(); });
      sleeping_workers.fetch_sub(1);
      seen = posted.load();
    }
  }

  slot* claim_slot() {
    for (slot& s : slots) {
      bool expected = false;
      if (!s.owned.load(std::memory_order_relaxed) &&
          s.owned.compare_exchange_strong(expected, true, std::memory_order_acquire))
        return &s;
    }
    return nullptr;
  }

  /// Runs `j` on this thread and every worker that joins; false if no slot was free.
  bool run(job& j) {
    slot* s = claim_slot();
    if (s == nullptr) return false;
    s->current.store(&j);
    posted.fetch_add(1);
    // Polling workers see `posted`; only sleeping ones need the system call.
    if (sleeping_workers.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex);
      wake.notify_all();
    }
    while (j.run_one_chunk()) {
    }
    // Every chunk is claimed. Clear the slot; then no worker counted in later can reach `j`.
    s->current.store(nullptr);
    const auto nobody_inside = [&] { return s->users.load() == 0; };
    if (!spin_until(nobody_inside)) {
      std::unique_lock<std::mutex> lock(mutex);
      waiting_callers.fetch_add(1);
      finished.wait(lock, nobody_inside);
      waiting_callers.fetch_sub(1);
    }
    s->owned.store(false, std::memory_order_release);
    return true;
  }
};

namespace {

constexpr int64_t default_spin_ns = 50'000;

// BRIGADE_SPIN_US in nanoseconds, or -1 when unset.
int64_t spin_from_environment() {
  static const int64_t ns = [] {
    const char* env = std::getenv("BRIGADE_SPIN_US");
    if (env == nullptr) return int64_t{-1};
    const long us = std::strtol(env, nullptr, 10);
    return static_cast<int64_t>(std::max(0L, us)) * 1000;
  }();
  return ns;
}

// The spin windows alive, and the longest of them (or the default) where workers read it.
struct spin_windows {
  std::mutex mutex;
  std::multiset<int64_t> alive;
  std::atomic<int64_t> current{default_spin_ns};

  void update() {
    current.store(alive.empty() ? default_spin_ns : std::max(default_spin_ns, *alive.rbegin()),
                  std::memory_order_relaxed);
  }
};

spin_windows& windows() {
  static spin_windows w;
  return w;
}

}  // namespace

int64_t thread_pool::spin_nanoseconds() {
  const int64_t forced = spin_from_environment();
  return forced >= 0 ? forced : windows().current.load(std::memory_order_relaxed);
}

thread_pool::spin_window::spin_window(std::chrono::microseconds window)
    : ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count()) {
  spin_windows& w = windows();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.alive.insert(ns_);
  w.update();
}

thread_pool::spin_window::~spin_window() {
  spin_windows& w = windows();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.alive.erase(w.alive.find(ns_));
  w.update();
}

thread_pool::thread_pool(int threads)
    : threads_(std::max(1, threads)), state_(std::make_unique<state>()) {
  state_->workers.reserve(static_cast<size_t>(threads_ - 1));
  for (int i = 1; i < threads_; ++i)
    state_->workers.emplace_back([s = state_.get()] { s->worker_loop(); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping.store(true);
  }
  state_->posted.fetch_add(1);
  state_->wake.notify_all();
  for (auto& t : state_->workers)
    t.join();
}

thread_pool& thread_pool::shared() {
  static thread_pool pool([] {
    if (const char* env = std::getenv("BRIGADE_THREADS")) {
      const int n = std::atoi(env);
      if (n > 0) return n;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }());
  return pool;
}

void thread_pool::parallel_for(size_t n, size_t grain,
                               const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  const size_t threads = static_cast<size_t>(size());
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  job j;
  j.fn = &fn;
  j.n = n;
  // A few chunks per thread balance uneven work without making chunks tiny.
  const size_t target_chunks = std::min((n + grain - 1) / grain, threads * 4);
  j.chunk = (n + target_chunks - 1) / target_chunks;
  j.chunks = (n + j.chunk - 1) / j.chunk;
  // Every slot taken (more callers at once than slots): the caller runs the job alone.
  if (!state_->run(j)) fn(0, n);
}

}  // namespace brigade

#include "common/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
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

struct job {
  const std::function<void(size_t, size_t)>* fn = nullptr;
  size_t n = 0;
  size_t chunk = 1;
  size_t chunks = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  /// Workers holding a pointer to this job. A worker's decrement is its last touch of the job,
  /// so the caller may destroy it once this is 0 and the job has left the queue.
  std::atomic<int> users{0};

  bool has_chunks() const { return next.load(std::memory_order_relaxed) < chunks; }
  bool complete() const {
    return done.load(std::memory_order_acquire) == chunks &&
           users.load(std::memory_order_acquire) == 0;
  }
  /// Runs the next chunk, if any is left; says whether it ran one.
  bool run_one_chunk() {
    const size_t c = next.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks) return false;
    const size_t begin = c * chunk;
    (*fn)(begin, std::min(n, begin + chunk));
    done.fetch_add(1, std::memory_order_release);
    return true;
  }
};

}  // namespace

struct thread_pool::state {
  std::mutex mutex;
  std::condition_variable wake;      ///< Workers asleep wait here for a job.
  std::condition_variable finished;  ///< Callers wait here for workers still inside their job.
  std::deque<job*> jobs;             ///< Guarded by mutex.
  int sleeping_workers = 0;          ///< Guarded by mutex.
  int waiting_callers = 0;           ///< Guarded by mutex.
  bool stopping = false;             ///< Guarded by mutex.
  std::atomic<uint64_t> posted{0};   ///< Counts jobs posted: what spinning workers watch.
  std::vector<std::thread> workers;

  bool any_job_open() const {
    return std::any_of(jobs.begin(), jobs.end(), [](const job* j) { return j->has_chunks(); });
  }

  job* take_job() {
    std::lock_guard<std::mutex> lock(mutex);
    for (job* candidate : jobs) {
      if (candidate->has_chunks()) {
        candidate->users.fetch_add(1, std::memory_order_relaxed);
        return candidate;
      }
    }
    return nullptr;
  }

  void leave_job(job& j) {
    j.users.fetch_sub(1, std::memory_order_acq_rel);
    // `j` may be gone from here on. Taking the mutex orders this against a caller that checked
    // the job under it and is about to wait, so the notification is never lost.
    std::lock_guard<std::mutex> lock(mutex);
    if (waiting_callers > 0) finished.notify_all();
  }

  void worker_loop() {
    uint64_t seen = posted.load(std::memory_order_acquire);
    for (;;) {
      if (job* j = take_job()) {
        while (j->run_one_chunk()) {
        }
        leave_job(*j);
        continue;
      }
      // Nothing to do: poll for the next job for a while, then sleep.
      if (spin_until([&] { return posted.load(std::memory_order_acquire) != seen; })) {
        seen = posted.load(std::memory_order_acquire);
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex);
      ++sleeping_workers;
      wake.wait(lock, [&] { return stopping || any_job_open(); });
      --sleeping_workers;
      if (stopping) return;
      seen = posted.load(std::memory_order_acquire);
    }
  }

  void run(job& j) {
    bool wake_sleepers = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      jobs.push_back(&j);
      wake_sleepers = sleeping_workers > 0;
    }
    posted.fetch_add(1, std::memory_order_release);
    // Spinning workers see `posted`; only sleeping ones need the system call.
    if (wake_sleepers) wake.notify_all();
    while (j.run_one_chunk()) {
    }
    // No new worker can pick the job once it leaves the queue; wait for those still inside it.
    {
      std::lock_guard<std::mutex> lock(mutex);
      jobs.erase(std::find(jobs.begin(), jobs.end(), &j));
    }
    if (spin_until([&] { return j.complete(); })) return;
    std::unique_lock<std::mutex> lock(mutex);
    ++waiting_callers;
    finished.wait(lock, [&] { return j.complete(); });
    --waiting_callers;
  }
};

int64_t thread_pool::spin_nanoseconds() {
  static const int64_t ns = [] {
    if (const char* env = std::getenv("BRIGADE_SPIN_US")) {
      const long us = std::strtol(env, nullptr, 10);
      return static_cast<int64_t>(std::max(0L, us)) * 1000;
    }
    return int64_t{50'000};
  }();
  return ns;
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
    state_->stopping = true;
  }
  state_->posted.fetch_add(1, std::memory_order_release);
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
  state_->run(j);
}

}  // namespace brigade

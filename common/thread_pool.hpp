// A fixed pool of worker threads for data-parallel kernels.
//
// Results never depend on how work is split: callers give each index range a job whose output
// elements are computed entirely inside one call, so any thread count gives the same bits.
//
// Decode calls parallel_for some 70 times per step on jobs of a few microseconds each, so the
// hand-off itself must cost far less than that. Workers therefore spin for a short while after
// each job before they sleep on the condition variable, and callers spin briefly while the last
// chunks finish: a job that follows within the spin window starts without a system call, and
// without a lock (a caller publishes its job in a slot of the pool; thread_pool.cpp). `brigade
// bench engine` measures the hand-off: 0.21 us on 2 cores, against 0.42-0.90 us when a mutex
// guarded a queue of jobs (workers and caller then met on it at every job's start and end).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace brigade {

class thread_pool {
 public:
  /// Starts `threads - 1` workers; the calling thread is the last participant.
  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// The process-wide pool, sized by BRIGADE_THREADS or the number of hardware threads.
  static thread_pool& shared();

  /// Calls fn(begin, end) over [0, n) in chunks of about `grain` items, on all threads, and
  /// returns when every chunk is done. Safe to call from several threads at once.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

  int size() const { return threads_; }

  /// How long an idle worker polls for the next job before it sleeps: BRIGADE_SPIN_US when set
  /// (0 sleeps at once), else the longest spin_window alive, else 50 us. Bounded so that an
  /// idle pool costs no CPU beyond that window.
  static int64_t spin_nanoseconds();

  /// While one lives, idle workers of every pool poll for at least `window` before they sleep
  /// (BRIGADE_SPIN_US, when set, still decides). A process that runs actor roles holds one: there
  /// a step's next job follows an actor round trip (a message to an expert shard and its reply,
  /// 100-300 us on the 2-core VM), not the previous job, so with 50 us the workers slept before
  /// almost every layer and each job began by waking them (docs/cpu_kernels.md, "The spin window
  /// under actors").
  class spin_window {
   public:
    explicit spin_window(std::chrono::microseconds window);
    ~spin_window();
    spin_window(const spin_window&) = delete;
    spin_window& operator=(const spin_window&) = delete;

   private:
    int64_t ns_;
  };

 private:
  struct state;  // The queue, the workers and their synchronisation (thread_pool.cpp).
  int threads_;
  std::unique_ptr<state> state_;
};

}  // namespace brigade

// A fixed pool of worker threads for data-parallel kernels.
//
// Results never depend on how work is split: callers give each index range a job whose output
// elements are computed entirely inside one call, so any thread count gives the same bits.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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

  int size() const { return static_cast<int>(workers_.size()) + 1; }

 private:
  struct job;
  void worker_loop();
  static bool run_one_chunk(job& j);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<job*> jobs_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

}  // namespace brigade

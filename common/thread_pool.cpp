#include "common/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace brigade {

struct thread_pool::job {
  const std::function<void(size_t, size_t)>* fn = nullptr;
  size_t n = 0;
  size_t chunk = 1;
  size_t chunks = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  int users = 0;  // Workers holding a pointer to this job; guarded by the pool mutex.
  std::condition_variable finished;
};

thread_pool::thread_pool(int threads) {
  const int workers = std::max(0, threads - 1);
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i)
    workers_.emplace_back([this] { worker_loop(); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_)
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

bool thread_pool::run_one_chunk(job& j) {
  const size_t c = j.next.fetch_add(1);
  if (c >= j.chunks) return false;
  const size_t begin = c * j.chunk;
  const size_t end = std::min(j.n, begin + j.chunk);
  (*j.fn)(begin, end);
  j.done.fetch_add(1);
  return true;
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(&j);
  }
  wake_.notify_all();
  while (run_one_chunk(j)) {
  }
  // No new worker can pick the job once it leaves the queue; wait for those still inside it.
  std::unique_lock<std::mutex> lock(mutex_);
  jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &j));
  j.finished.wait(lock, [&] { return j.users == 0 && j.done.load() == j.chunks; });
}

void thread_pool::worker_loop() {
  for (;;) {
    job* j = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        if (stopping_) return true;
        for (job* candidate : jobs_) {
          if (candidate->next.load() < candidate->chunks) return true;
        }
        return false;
      });
      if (stopping_) return;
      for (job* candidate : jobs_) {
        if (candidate->next.load() < candidate->chunks) {
          j = candidate;
          ++j->users;
          break;
        }
      }
    }
    while (j && run_one_chunk(*j)) {
    }
    if (j) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--j->users == 0) j->finished.notify_all();
    }
  }
}

}  // namespace brigade

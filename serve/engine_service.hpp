// inference_service over the single-process engine, stepping on a thread of its own.
//
// Continuous batching: submissions and cancellations queue to the engine thread, which applies
// them between steps, steps while any sequence is waiting or running, and sleeps otherwise.
// Admission is bounded: at most max_queued requests may wait (not yet running), beyond which
// submit() answers resource_exhausted.
//
//   constructed --start()--> running --stop()--> stopped
//        |                                          ^
//        +------------------stop()------------------+
//
// Requests submitted before start() wait in the queue (tests use this to fill it on purpose).
// stop() fails every unfinished request with errc::unavailable and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpu/backend.hpp"
#include "model/engine.hpp"
#include "model/loaded_model.hpp"
#include "serve/inference_service.hpp"

namespace brigade::serve {

struct engine_service_options {
  std::string model_name;  ///< Served name; empty takes the model directory's last part.
  int max_queued = 256;    ///< Requests waiting to run, beyond which submit() is refused.
  model::engine_options engine;
};

class engine_service final : public inference_service {
 public:
  /// `model` and `dev` must outlive the service.
  engine_service(const model::loaded_model& model, gpu::backend& dev,
                 const engine_service_options& options);
  ~engine_service() override;
  engine_service(const engine_service&) = delete;
  engine_service& operator=(const engine_service&) = delete;

  /// Starts the engine thread.
  void start();
  /// Fails unfinished requests with errc::unavailable and joins the engine thread.
  void stop();
  /// Requests submitted and not yet finished.
  int in_flight() const { return in_flight_.load(); }

  status submit(generation_request request, std::shared_ptr<generation_sink> sink) override;
  void cancel(int64_t request_id) override;
  service_info info() const override { return info_; }
  bool ready() const override { return started_.load() && !stopping_flag_.load(); }
  std::string actors_json() const override;
  /// One entry, the engine, in the topology's shape (deploy/status_json.hpp): its queue, steps
  /// and, in detail, its speculation counts, so the dashboard's panels work without a topology.
  std::string status_json() const override;
  void collect_metrics(metrics::registry& into) const override;

 private:
  struct submission {
    generation_request request;
    std::shared_ptr<generation_sink> sink;
  };
  struct live_request {
    int64_t request_id = 0;
    int prompt_tokens = 0;
    int generated = 0;
    int top_logprobs = -1;
    std::shared_ptr<generation_sink> sink;
  };

  void run();
  bool take_work(std::deque<submission>& submitted, std::vector<int64_t>& cancelled);
  void apply_cancels(const std::vector<int64_t>& cancelled);
  void admit(std::deque<submission>& submitted);
  void dispatch(const std::vector<model::token_event>& events);
  void finish(int64_t engine_id, const error* err, finish_reason reason);
  void fail_all(const error& err);
  void publish_counts();

  service_info info_;
  engine_service_options options_;
  model::engine engine_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<submission> submitted_;       // Guarded by mutex_.
  std::vector<int64_t> cancelled_;         // Guarded by mutex_.
  std::unordered_set<int64_t> known_ids_;  // Guarded by mutex_: submitted and not finished.
  bool stopping_ = false;                  // Guarded by mutex_.
  model::speculation_stats speculation_;   // Guarded by mutex_: the engine's, as last published.

  // Engine thread only.
  std::unordered_map<int64_t, live_request> by_engine_id_;
  std::unordered_map<int64_t, int64_t> engine_id_of_;

  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_flag_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int> engine_waiting_{0};
  std::atomic<int> engine_running_{0};
  std::atomic<uint64_t> steps_{0};
  std::atomic<uint64_t> cancels_applied_{0};
  std::thread thread_;
};

}  // namespace brigade::serve

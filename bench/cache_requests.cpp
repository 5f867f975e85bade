#include "bench/cache_requests.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "deploy/topology.hpp"

namespace brigade::bench {
namespace {

using steady = std::chrono::steady_clock;

// A sink that records when the first token arrived and when the request ended.
class timing_sink final : public serve::generation_sink {
 public:
  void on_tokens(const std::vector<int32_t>&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!first_) first_ = steady::now();
  }
  void on_finished(serve::finish_reason, const serve::generation_usage& usage) override {
    std::lock_guard<std::mutex> lock(mutex_);
    usage_ = usage;
    done_ = true;
    cv_.notify_all();
  }
  void on_error(const error& err) override {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = err.message;
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }
  steady::time_point first() const { return *first_; }
  const serve::generation_usage& usage() const { return usage_; }
  const std::string& failure() const { return error_; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<steady::time_point> first_;
  serve::generation_usage usage_;
  std::string error_;
  bool done_ = false;
};

}  // namespace

std::vector<int32_t> tokens_of(uint64_t stream, int count, int vocab) {
  std::vector<int32_t> out;
  uint64_t x = 0x9e3779b97f4a7c15ull * (stream + 1);
  for (int i = 0; i < count; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    out.push_back(static_cast<int32_t>(3 + x % static_cast<uint64_t>(vocab - 3)));
  }
  return out;
}

worker_account prefill_account(const deploy::topology& topo) {
  worker_account out;
  for (const auto& s : nlohmann::json::parse(topo.statuses_json())) {
    if (s["role"] != "prefill") continue;
    out.steps += s["steps"].get<int64_t>();
    out.computed_tokens += s["detail"]["tokens_prefilled"].get<int64_t>();
    out.busy_s += s["detail"]["busy_s"].get<double>();
  }
  return out;
}

run_result run_requests(deploy::topology& topo, const std::vector<std::vector<int32_t>>& prompts,
                        int concurrency) {
  static std::atomic<int64_t> next_id{1};
  run_result out;
  std::mutex mutex;  // guards out
  std::atomic<size_t> next{0};
  auto client = [&] {
    for (size_t i = next++; i < prompts.size(); i = next++) {
      serve::generation_request r;
      r.id = next_id++;
      r.prompt = prompts[i];
      r.max_tokens = 1;
      r.scenario = "agent";
      auto sink = std::make_shared<timing_sink>();
      const auto submitted = steady::now();
      status s = topo.service().submit(std::move(r), sink);
      if (s) sink->wait();
      std::lock_guard<std::mutex> lock(mutex);
      if (!s || !sink->failure().empty()) {
        out.failure = s ? sink->failure() : s.err().message;
        continue;
      }
      out.ttft_ms.push_back(
          std::chrono::duration<double, std::milli>(sink->first() - submitted).count());
      out.prompt_tokens += sink->usage().prompt_tokens;
      out.cached_tokens += sink->usage().cached_tokens;
    }
  };
  const worker_account before = prefill_account(topo);
  const auto start = steady::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c)
    clients.emplace_back(client);
  for (auto& t : clients)
    t.join();
  out.wall_s = std::chrono::duration<double>(steady::now() - start).count();
  const worker_account after = prefill_account(topo);
  out.worker.steps = after.steps - before.steps;
  out.worker.computed_tokens = after.computed_tokens - before.computed_tokens;
  out.worker.busy_s = after.busy_s - before.busy_s;
  return out;
}

void wait_store_idle(const deploy::topology& topo) {
  for (int tries = 0; tries < 6000; ++tries) {
    int64_t sent = 0, received = -1;
    bool idle = false;
    for (const auto& s : nlohmann::json::parse(topo.statuses_json())) {
      const auto& d = s["detail"];
      if (s["role"] == "prefill") sent += d["cache"].value("demotion_batches", int64_t{0});
      if (s["role"] != "kv_store") continue;
      received = d.value("demotion_batches", int64_t{-1});
      idle = d.value("queue_depth", 1) == 0 && d.value("pending_demotions", 1) == 0;
    }
    if (idle && sent == received) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace brigade::bench

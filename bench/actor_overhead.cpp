#include "bench/actor_overhead.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "deploy/topology.hpp"
#include "model/engine.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::steady_clock;

std::vector<int32_t> prompt(int i, int vocab) {
  std::vector<int32_t> p;
  for (int t = 0; t < 32; ++t)
    p.push_back((i * 7919 + t * 104729) % (vocab - 16) + 8);
  return p;
}

// Counts tokens per request; the topology run waits on it.
class counting_sink final : public serve::generation_sink {
 public:
  void on_tokens(const std::vector<int32_t>& t) override {
    std::lock_guard<std::mutex> lock(m_);
    tokens_ += static_cast<int>(t.size());
    cv_.notify_all();
  }
  void on_finished(serve::finish_reason, const serve::generation_usage&) override {}
  void on_error(const error&) override {}
  bool wait_for(int n, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, timeout, [&] { return tokens_ >= n; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int tokens_ = 0;
};

result<double> engine_step_ms(const std::string& dir, int batch, int steps) {
  auto dev = gpu::make_cpu_backend();
  auto m = model::loaded_model::load(dir, *dev, true);
  if (!m) return m.err();
  model::engine_options opt;
  opt.max_running = batch;
  opt.kv_tokens = batch * (64 + steps + 16);
  model::engine eng(*m.value(), *dev, opt);
  model::request_options req;
  req.max_tokens = steps + 4;
  for (int b = 0; b < batch; ++b)
    (void)eng.submit(prompt(b, m.value()->config.vocab_size), req);
  std::vector<model::token_event> ev;
  std::set<int64_t> started;
  while (static_cast<int>(started.size()) < batch) {
    ev.clear();
    if (!eng.step(ev)) return error(errc::internal, "the engine stopped before decoding");
    for (const auto& e : ev)
      started.insert(e.request);
  }
  const auto start = clock_type::now();
  for (int s = 0; s < steps; ++s) {
    ev.clear();
    eng.step(ev);
  }
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count() / steps;
}

// The decode worker's (steps, total step ms) from /v1/status.
std::pair<int64_t, double> decode_steps(deploy::topology& t) {
  const auto all = nlohmann::json::parse(t.statuses_json());
  for (const auto& s : all) {
    if (s["role"] == "decode") {
      return {s["steps"].get<int64_t>(), s["detail"].value("step_ms_total", 0.0)};
    }
  }
  return {0, 0.0};
}

result<double> topology_step_ms(const std::string& dir, int batch, int steps, int shards) {
  config::manifest m = config::default_manifest(dir);
  m.experts.count = shards;
  m.decode.max_running = batch;
  m.eplb.enabled = false;
  auto t = deploy::topology::start(m);
  if (!t) return t.err();
  const int vocab = t.value()->config().vocab_size;
  std::vector<std::shared_ptr<counting_sink>> sinks;
  for (int b = 0; b < batch; ++b) {
    serve::generation_request r;
    r.id = b + 1;
    r.prompt = prompt(b, vocab);
    r.max_tokens = 3 * steps + 8;
    auto sink = std::make_shared<counting_sink>();
    status s = t.value()->service().submit(r, sink);
    if (!s) return s.err();
    sinks.push_back(sink);
  }
  // Measure only while every sequence decodes: after each has two tokens.
  for (auto& s : sinks) {
    if (!s->wait_for(2, std::chrono::seconds(120))) return error(errc::internal, "no tokens");
  }
  const auto before = decode_steps(*t.value());
  sinks[0]->wait_for(2 + steps, std::chrono::seconds(300));
  const auto after = decode_steps(*t.value());
  for (int b = 0; b < batch; ++b)
    t.value()->service().cancel(b + 1);
  const int64_t n = after.first - before.first;
  if (n <= 0) return error(errc::internal, "the decode worker ran no steps");
  return (after.second - before.second) / static_cast<double>(n);
}

}  // namespace

result<overhead_figures> measure_actor_overhead(const std::string& model_dir, int batch, int steps,
                                                int shards) {
  overhead_figures f;
  f.batch = batch;
  f.steps = steps;
  // Rounds alternate between the two so that a noisy moment on the machine hits both sides; each
  // side's figure is its median round.
  constexpr int rounds = 5;
  std::vector<double> engine, topology;
  for (int r = 0; r < rounds; ++r) {
    auto e = engine_step_ms(model_dir, batch, steps);
    if (!e) return e.err();
    engine.push_back(e.value());
    auto a = topology_step_ms(model_dir, batch, steps, shards);
    if (!a) return a.err();
    topology.push_back(a.value());
  }
  std::sort(engine.begin(), engine.end());
  std::sort(topology.begin(), topology.end());
  f.rounds = rounds;
  f.engine_step_ms = engine[rounds / 2];
  f.topology_step_ms = topology[rounds / 2];
  return f;
}

}  // namespace brigade::bench

#include "bench/migration_stall.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/sample_statistics.hpp"
#include "common/subprocess.hpp"
#include "deploy/topology.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::system_clock;

double unix_ms(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
}

// Records when each token arrives: one per decode step for a running sequence.
class timing_sink final : public serve::generation_sink {
 public:
  void on_tokens(const std::vector<int32_t>& t) override {
    std::lock_guard<std::mutex> lock(m_);
    for (size_t i = 0; i < t.size(); ++i)
      arrivals_.push_back(unix_ms(clock_type::now()));
    cv_.notify_all();
  }
  void on_finished(serve::finish_reason, const serve::generation_usage&) override { ended_ = true; }
  void on_error(const error&) override { ended_ = true; }
  /// The sequence has finished or failed: no more steps to time.
  bool ended() const { return ended_; }
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, std::chrono::seconds(120), [&] { return arrivals_.size() >= n; });
  }
  std::vector<double> arrivals() {
    std::lock_guard<std::mutex> lock(m_);
    return arrivals_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<double> arrivals_;
  std::atomic<bool> ended_{false};
};

struct step_time {
  double ms = 0;
  double end_unix_ms = 0;
  bool during = false;   ///< Overlapped a migration.
  bool control = false;  ///< Overlapped a control window (and no migration).
};

// The median gap between the last `count` arrivals: the step time now.
double recent_median_gap(const std::vector<double>& arrivals, size_t count) {
  std::vector<double> gaps;
  for (size_t i = arrivals.size() > count ? arrivals.size() - count : 1; i < arrivals.size(); ++i)
    gaps.push_back(arrivals[i] - arrivals[i - 1]);
  return quantile(gaps, 0.5);
}

// Each step over the median of the 16 steps outside migrations nearest to it (8 before and 8
// after where there are, never itself): step times drift as contexts grow, and this takes the
// drift out without hiding a step's own jump.
std::vector<double> local_ratios(const std::vector<step_time>& steps) {
  std::vector<size_t> outside;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].during) outside.push_back(i);
  }
  std::vector<double> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t at =
        static_cast<size_t>(std::lower_bound(outside.begin(), outside.end(), i) - outside.begin());
    const size_t after = at < outside.size() && outside[at] == i ? at + 1 : at;
    // 8 on each side, shifted inwards at the run's ends so that there are always 16.
    size_t lo = at >= 8 ? at - 8 : 0;
    size_t hi = after + 8 + (8 - (at - lo));
    if (hi > outside.size()) {
      const size_t missing = hi - outside.size();
      hi = outside.size();
      lo = lo >= missing ? lo - missing : 0;
    }
    std::vector<double> near;
    for (size_t k = lo; k < hi; ++k) {
      if (outside[k] != i) near.push_back(steps[outside[k]].ms);
    }
    out.push_back(near.empty() ? 1.0 : steps[i].ms / quantile(near, 0.5));
  }
  return out;
}

// Times `reps` runs of fixed single-thread work about `target_ms` long and returns p99 over
// median: the spread this machine gives identical work. The work streams a 64 MiB buffer through
// a small one, as a decode step streams its KV cache, so it meets the same memory-bandwidth noise
// (the host's other tenants) that the steps meet; a loop inside L1 spreads less.
double fixed_loop_p99_ratio(double target_ms, int reps) {
  constexpr size_t chunk = 16384;
  std::vector<float> big(size_t{64} << 18, 1.0f), small(chunk);
  volatile float sink = 0;
  size_t at = 0;
  auto time_ms = [&](size_t chunks) {
    const auto t0 = std::chrono::steady_clock::now();
    float acc = 0;
    for (size_t c = 0; c < chunks; ++c) {
      std::memcpy(small.data(), big.data() + at, chunk * sizeof(float));
      at = at + 2 * chunk <= big.size() ? at + chunk : 0;
      for (size_t k = 0; k < chunk; k += 16)
        acc += small[k];
    }
    sink = sink + acc;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  time_ms(big.size() / chunk);  // pages in
  const double per_chunk = std::max(1e-6, time_ms(1024) / 1024.0);
  const auto chunks = static_cast<size_t>(std::max(1.0, target_ms / per_chunk));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i)
    ms.push_back(time_ms(chunks));
  return quantile(ms, 0.99) / quantile(ms, 0.5);
}

// The steps as the bootstrap draws them: a cycle per migration, from its start to the next one's
// (the steps before the first migration make a cycle of their own), each split into the steps
// that overlapped a migration and those to compare them with, as local ratios: every other step,
// or with `controls_only` the steps that overlapped the cycle's control window.
std::vector<sample_group> cycles_of(const std::vector<step_time>& steps,
                                    const std::vector<double>& local,
                                    const std::vector<std::pair<double, double>>& windows,
                                    bool controls_only) {
  std::vector<double> starts;
  for (const auto& w : windows)
    starts.push_back(w.first);
  std::vector<sample_group> cycles(starts.size() + 1);
  for (size_t i = 0; i < steps.size(); ++i) {
    // A step that ends after a migration started belongs to that migration's cycle.
    const auto cycle = static_cast<size_t>(
        std::upper_bound(starts.begin(), starts.end(), steps[i].end_unix_ms) - starts.begin());
    if (steps[i].during) {
      cycles[cycle].a.push_back(local[i]);
    } else if (!controls_only || steps[i].control) {
      cycles[cycle].b.push_back(local[i]);
    }
  }
  cycles.erase(std::remove_if(cycles.begin(), cycles.end(),
                              [](const sample_group& g) { return g.a.empty() && g.b.empty(); }),
               cycles.end());
  return cycles;
}

// The run as `--steps-svg` draws it, in seconds from the first timed step.
step_plot plot_of(const std::vector<step_time>& steps, const std::vector<double>& local,
                  const std::vector<std::pair<double, double>>& windows,
                  const std::vector<std::pair<double, double>>& controls) {
  step_plot p;
  if (steps.empty()) return p;
  const double origin = steps.front().end_unix_ms;
  auto seconds = [origin](double unix_ms) { return (unix_ms - origin) / 1000.0; };
  for (size_t i = 0; i < steps.size(); ++i)
    p.steps.push_back({seconds(steps[i].end_unix_ms), local[i], steps[i].during});
  for (const auto& [from, to] : windows)
    p.migrations.emplace_back(seconds(from), seconds(to));
  for (const auto& [from, to] : controls)
    p.controls.emplace_back(seconds(from), seconds(to));
  return p;
}

// Migration windows [start, end] in unix ms from the supervisor's events.
std::vector<std::pair<double, double>> windows_of(const nlohmann::json& events) {
  std::vector<std::pair<double, double>> out;
  double start = -1;
  for (const auto& e : events) {
    const std::string kind = e["kind"];
    if (kind == "migration_started") start = e["unix_ms"].get<double>();
    if ((kind == "migration_finished" || kind == "migration_rolled_back") && start >= 0) {
      out.emplace_back(start, e["unix_ms"].get<double>());
      start = -1;
    }
  }
  return out;
}

// The supervisor keeps only its latest events (256), so the bench reads them as they come: a run
// of any length keeps every migration window.
class event_reader {
 public:
  explicit event_reader(const deploy::topology& t) : t_(t) {}
  void read_new() {
    for (auto& e : nlohmann::json::parse(t_.events_json(seen_))) {
      seen_ = std::max(seen_, e["seq"].get<uint64_t>());
      events_.push_back(std::move(e));
    }
  }
  const nlohmann::json& events() const { return events_; }

 private:
  const deploy::topology& t_;
  uint64_t seen_ = 0;
  nlohmann::json events_ = nlohmann::json::array();
};

// A control window for each migration window: as long, in the middle of the quiet time before
// the next migration, at least `guard` from both (none where that time is too short). A step
// overlaps a window with a chance that grows with its own length (a step as long as the window is
// twice as likely to overlap it as a very short one), so the steps overlapping any window are
// longer than the steps at large even when nothing happens in the window; the steps overlapping
// control windows show how much.
std::vector<std::pair<double, double>> control_windows(
    const std::vector<std::pair<double, double>>& migrations, double run_end, double guard) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < migrations.size(); ++i) {
    const double length = migrations[i].second - migrations[i].first;
    const double quiet_from = migrations[i].second;
    const double quiet_to = i + 1 < migrations.size() ? migrations[i + 1].first : run_end;
    if (quiet_to - quiet_from < length + 2 * guard) continue;
    const double start = quiet_from + (quiet_to - quiet_from - length) / 2;
    out.emplace_back(start, start + length);
  }
  return out;
}

// Starts `brigade node` (this same binary) on a free loopback port; its address is in the first
// line it prints.
result<std::pair<subprocess, std::string>> start_node(const std::string& name,
                                                      const std::string& secret_file) {
  subprocess::options o;
  o.argv = {"/proc/self/exe",     "node",      "--listen", "127.0.0.1:0",
            "--join-secret-file", secret_file, "--name",   name};
  auto child = subprocess::spawn(o);
  if (!child) return child.err();
  auto line = child.value().read_line(std::chrono::seconds(30));
  if (!line)
    return error(errc::unavailable, "node " + name + " did not start: " + line.err().message);
  const std::string marker = "listening on ";
  const size_t at = line.value().find(marker);
  if (at == std::string::npos)
    return error(errc::unavailable, "node " + name + " said: " + line.value());
  const size_t begin = at + marker.size();
  const std::string address = line.value().substr(begin, line.value().find(' ', begin) - begin);
  return std::make_pair(std::move(child.value()), address);
}

constexpr int sequences = 32;
constexpr int tokens_per_sequence = 8000;

// The model and manifest the bench decodes with: 4 shards of 10 slots for 32 experts, so that 8
// replicas move around, and room for every sequence to run to its end.
result<config::manifest> stall_manifest(const std::string& work_dir, int copy_interval_ms) {
  const std::string dir = work_dir + "/migration-model";
  model::model_spec spec;
  spec.layers = 4;
  spec.hidden = 256;
  spec.experts = 32;
  spec.top_k = 4;
  spec.moe_inter = 256;
  spec.max_positions = 8192;
  spec.seed = 11;
  // Written every run (a fraction of a second): a model kept from an older build of the bench
  // could have another shape, and cut the sequences short.
  if (status st = model::write_random_model(spec, dir); !st) return st.err();
  config::manifest m = config::default_manifest(dir);
  m.experts.count = 4;
  m.experts.slots_per_shard = 10;
  m.decode.max_running = 32;
  m.decode.kv_tokens = sequences * (16 + tokens_per_sequence + 64);
  m.eplb.enabled = false;
  m.eplb.copy_interval_ms = copy_interval_ms;
  return m;
}

// Starts two `brigade node` processes on loopback and places the roles on them in `m`: 2 shards
// each, prefill and decode on the first. The nodes are killed when the returned handles go.
result<std::vector<subprocess>> add_two_nodes(config::manifest& m, const std::string& work_dir,
                                              const std::string& tls) {
  const std::string secret = work_dir + "/join-secret";
  if (FILE* f = std::fopen(secret.c_str(), "w")) {
    std::fprintf(f, "brigade-bench-%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  m.join_secret_file = secret;
  m.transport.tls = tls;
  m.transport.net_devices = "lo";
  std::vector<subprocess> nodes;
  for (int n = 1; n <= 2; ++n) {
    auto node = start_node("n" + std::to_string(n), secret);
    if (!node) return node.err();
    config::node_spec on;
    on.name = "n" + std::to_string(n);
    on.address = node.value().second;
    on.expert_shards = 2;
    on.prefill = n == 1 ? 1 : 0;
    on.decode = n == 1 ? 1 : 0;
    m.nodes.push_back(on);
    nodes.push_back(std::move(node.value().first));
  }
  return nodes;
}

// Submits the batch and waits until every sequence decodes; the first sink times the steps.
result<std::vector<std::shared_ptr<timing_sink>>> start_decoding(deploy::topology& t) {
  std::vector<std::shared_ptr<timing_sink>> sinks;
  for (int b = 0; b < sequences; ++b) {
    serve::generation_request r;
    r.id = b + 1;
    for (int i = 0; i < 16; ++i)
      r.prompt.push_back((b * 131 + i * 17) % 2000 + 10);
    r.max_tokens = tokens_per_sequence;
    sinks.push_back(std::make_shared<timing_sink>());
    if (status s = t.service().submit(r, sinks.back()); !s) return s.err();
  }
  for (auto& s : sinks) {
    if (!s->wait_for(8)) return error(errc::unavailable, "decode did not start within 120 s");
  }
  return sinks;
}

struct migration_run {
  int started = 0;
  std::vector<std::pair<double, double>> windows;  ///< From the supervisor's events.
};

// Runs the random re-plans with steady steps between them. Stops early when the sequences would
// end before another cycle and the steps after it: a migration with no steps to time would count
// without being measured.
migration_run run_migrations(deploy::topology& t, timing_sink& sink,
                             const migration_stall_options& o) {
  migration_run run;
  event_reader events(t);
  auto quiet = std::chrono::milliseconds(150);
  size_t cycle_steps = 0;  // steps the last cycle took
  for (int i = 0; i < o.migrations; ++i) {
    const size_t at = sink.arrivals().size();
    if (sink.ended() || at + 2 * cycle_steps + 32 > static_cast<size_t>(tokens_per_sequence)) {
      break;
    }
    // Steady steps between migrations, so that "outside" has a baseline of its own and there is
    // room for a control window: 150 ms more than the last migration took, and its guards.
    std::this_thread::sleep_for(quiet);
    const auto started = std::chrono::steady_clock::now();
    if (!t.replan_randomly(static_cast<uint64_t>(i + 1), o.move_fraction).ok()) continue;
    // Not polled while it runs: building the layout's JSON costs the supervisor, and the steps
    // measured here share the cores with it. The windows come from the events' own timestamps.
    std::this_thread::sleep_for(std::chrono::milliseconds(o.two_nodes ? 250 : 100));
    for (int tries = 0; tries < 1200; ++tries) {
      if (nlohmann::json::parse(t.experts_json())["migration"].is_null()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    events.read_new();
    // The quiet time also holds a control window as long as this migration with its guards of
    // two median steps on each side (control_windows): with long steps it would not fit otherwise.
    const auto guards =
        std::chrono::milliseconds(static_cast<int64_t>(4 * recent_median_gap(sink.arrivals(), 64)));
    quiet = std::max(std::chrono::milliseconds(150),
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - started) +
                         std::chrono::milliseconds(150) + guards);
    ++run.started;
    cycle_steps = sink.arrivals().size() - at;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  events.read_new();
  run.windows = windows_of(events.events());
  return run;
}

// Every step from the token arrivals, marked by the windows it overlaps. The first steps go:
// the batch is still filling.
std::vector<step_time> steps_of(const std::vector<double>& arrivals,
                                const std::vector<std::pair<double, double>>& windows,
                                const std::vector<std::pair<double, double>>& controls) {
  auto overlaps = [](const std::vector<std::pair<double, double>>& in, double begin, double end) {
    for (const auto& [ws, we] : in) {
      if (begin <= we && end >= ws) return true;
    }
    return false;
  };
  std::vector<step_time> steps;
  for (size_t i = 9; i < arrivals.size(); ++i) {
    const double begin = arrivals[i - 1], end = arrivals[i];
    const bool during = overlaps(windows, begin, end);
    steps.push_back({end - begin, end, during, !during && overlaps(controls, begin, end)});
  }
  return steps;
}

// The figures of the timed steps, given each one's local ratio (local_ratios): percentiles of raw
// and local step times, inside and outside the windows, and the bootstrap intervals of the
// migrations' share.
void add_step_figures(migration_stall_figures& f, const std::vector<step_time>& steps,
                      const std::vector<double>& local,
                      const std::vector<std::pair<double, double>>& windows) {
  std::vector<double> during, outside, during_local, outside_local, control_local;
  for (size_t i = 0; i < steps.size(); ++i) {
    (steps[i].during ? during : outside).push_back(steps[i].ms);
    (steps[i].during ? during_local : outside_local).push_back(local[i]);
    if (steps[i].control) control_local.push_back(local[i]);
  }
  f.steps_during = static_cast<int>(during.size());
  f.steps_outside = static_cast<int>(outside.size());
  f.steps_control = static_cast<int>(control_local.size());
  f.median_ms = quantile(outside, 0.5);
  f.p99_during_ms = quantile(during, 0.99);
  f.p99_outside_ms = quantile(outside, 0.99);
  f.local_median_during = quantile(during_local, 0.5);
  f.local_p99_during = quantile(during_local, 0.99);
  f.local_median_outside = quantile(outside_local, 0.5);
  f.local_p99_outside = quantile(outside_local, 0.99);
  f.local_median_control = quantile(control_local, 0.5);
  f.local_p99_control = quantile(control_local, 0.99);
  const std::vector<sample_group> cycles = cycles_of(steps, local, windows, false);
  f.local_median_share_interval = bootstrap_quantile_ratio(cycles, 0.5);
  f.local_p99_share_interval = bootstrap_quantile_ratio(cycles, 0.99);
  const std::vector<sample_group> paired = cycles_of(steps, local, windows, true);
  f.median_over_control_interval = bootstrap_quantile_ratio(paired, 0.5);
  f.p99_over_control_interval = bootstrap_quantile_ratio(paired, 0.99);
  std::vector<timed_step> timed;
  for (size_t i = 0; i < steps.size(); ++i)
    timed.push_back({steps[i].end_unix_ms - steps[i].ms, steps[i].end_unix_ms, local[i]});
  f.phases = migration_phases(timed, windows);
}

}  // namespace

// A directory of this run's own under the work directory, removed when the run ends: runs at the
// same time (ctest -j) never read a model or a join secret another one is writing.
class run_directory {
 public:
  explicit run_directory(const std::string& work_dir)
      : path_(work_dir + "/run-" + std::to_string(::getpid())) {
    std::filesystem::create_directories(path_);
  }
  ~run_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  run_directory(const run_directory&) = delete;
  run_directory& operator=(const run_directory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

result<migration_stall_figures> measure_migration_stall(const migration_stall_options& o) {
  const run_directory dir(o.work_dir);  // outlives the nodes and the topology declared below
  auto m = stall_manifest(dir.path(), o.copy_interval_ms);
  if (!m) return m.err();
  std::vector<subprocess> nodes;  // killed when this returns
  if (o.two_nodes) {
    auto started = add_two_nodes(m.value(), dir.path(), o.transport_tls);
    if (!started) return started.err();
    nodes = std::move(started.value());
  }
  auto t = deploy::topology::start(m.value());
  if (!t) return t.err();
  auto sinks = start_decoding(*t.value());
  if (!sinks) return sinks.err();
  migration_stall_figures f;
  f.two_nodes = o.two_nodes;
  f.copy_interval_ms = o.copy_interval_ms;
  if (o.two_nodes) f.transport_tls = o.transport_tls;
  f.move_fraction = o.move_fraction;
  f.migrations_asked = o.migrations;
  const migration_run run = run_migrations(*t.value(), *sinks.value()[0], o);
  f.migrations = run.started;
  const auto& windows = run.windows;
  const auto arrivals = sinks.value()[0]->arrivals();
  for (int b = 0; b < sequences; ++b)
    t.value()->service().cancel(b + 1);
  std::vector<double> gaps;
  for (size_t i = 1; i < arrivals.size(); ++i)
    gaps.push_back(arrivals[i] - arrivals[i - 1]);
  // Two median steps from each migration: a step that overlaps a control window then does not
  // overlap a migration too.
  const auto controls =
      control_windows(windows, arrivals.empty() ? 0 : arrivals.back(), 2 * quantile(gaps, 0.5));
  const std::vector<step_time> steps = steps_of(arrivals, windows, controls);
  const std::vector<double> local = local_ratios(steps);
  add_step_figures(f, steps, local, windows);
  double total_s = 0;
  for (const auto& [ws, we] : windows)
    total_s += (we - ws) / 1000.0;
  f.mean_migration_s = windows.empty() ? 0 : total_s / static_cast<double>(windows.size());
  f.plot = plot_of(steps, local, windows, controls);
  t.value().reset();  // the topology stops: the machine is quiet for the fixed loop
  nodes.clear();
  f.machine_p99_ratio = fixed_loop_p99_ratio(f.median_ms, 400);
  return f;
}

}  // namespace brigade::bench

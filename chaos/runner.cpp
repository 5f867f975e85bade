#include "chaos/runner.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "chaos/cluster.hpp"
#include "chaos/driver.hpp"
#include "chaos/event_watch.hpp"
#include "chaos/fault_injector.hpp"
#include "chaos/oracle.hpp"
#include "chaos/run_checks.hpp"
#include "chaos/workload.hpp"
#include "common/hex.hpp"
#include "model/model_writer.hpp"

namespace brigade::chaos {
namespace {

using steady = std::chrono::steady_clock;

std::string fmt_ms(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%lld.%03llds", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return buf;
}

// The model the scenario runs: its own directory, or a small random one made once per spec.
result<std::string> prepare_model(const scenario& s, const std::string& root) {
  if (!s.topology.model_dir.empty()) return s.topology.model_dir;
  const model::model_spec& m = s.topology.make;
  const std::string key = m.family + "-l" + std::to_string(m.layers) + "-h" +
                          std::to_string(m.hidden) + "-e" + std::to_string(m.experts) + "-k" +
                          std::to_string(m.top_k) + "-i" + std::to_string(m.moe_inter) + "-v" +
                          std::to_string(m.vocab) + "-s" + std::to_string(m.seed) + "-" + m.dtype;
  const std::string dir = root + "/models/" + key;
  struct stat st {};
  if (::stat((dir + "/config.json").c_str(), &st) == 0) return dir;
  ::mkdir((root + "/models").c_str(), 0755);
  if (status w = model::write_random_model(m, dir); !w) return w.err();
  return dir;
}

// Whether the fault is one the cluster is expected to notice, and which events count as that.
bool noticeable(const fault_spec& f) {
  // A hang or cut shorter than the suspicion threshold (about 1.3 s with the default liveness
  // settings) is meant to pass unnoticed.
  const bool brief = f.for_ms > 0 && f.for_ms < 2000;
  switch (f.action) {
    case fault_spec::kind::kill:
      return f.target.what != fault_target::kind::coordinator;
    case fault_spec::kind::stop:
    case fault_spec::kind::partition:
      return f.target.what == fault_target::kind::node && f.plane != "data" && !brief;
    case fault_spec::kind::term:
      return f.target.what == fault_target::kind::node;
    case fault_spec::kind::restart:
      return f.target.what == fault_target::kind::node;
    default:
      return false;
  }
}

bool counts_as_detection(const fault_spec& f, const std::string& actor, const seen_event& e) {
  if (f.action == fault_spec::kind::restart) {
    return e.kind == "node_rejoined" && e.node == f.target.name;
  }
  if (f.target.what == fault_target::kind::node) {
    return e.node == f.target.name && (e.kind == "node_lost" || e.kind == "node_suspected" ||
                                       e.kind == "role_unreachable" || e.kind == "node_leaving");
  }
  return !actor.empty() && e.actor == actor &&
         (e.kind == "role_died" || e.kind == "role_unreachable" || e.kind == "role_gave_up");
}

// Whether the time to serve again counts from the fault's end rather than its start: when the
// coordinator itself is stopped (nothing can serve before it runs again), and for a data-plane
// cut between two nodes that stay in contact (nothing is lost to route around). A hung or cut
// off node is a failure to recover from while it lasts.
bool measured_from_end(const fault_spec& f) {
  if (f.for_ms <= 0) return false;
  if (f.target.what == fault_target::kind::coordinator) return f.action == fault_spec::kind::stop;
  return f.action == fault_spec::kind::partition && f.plane == "data";
}

// Whether the service must be back after the fault (a coordinator killed for good is not).
bool expects_service(const scenario& s, size_t index) {
  const fault_spec& f = s.faults[index];
  const bool takes_coordinator =
      f.target.what == fault_target::kind::coordinator &&
      (f.action == fault_spec::kind::kill || (f.action == fault_spec::kind::stop && f.for_ms == 0));
  return !takes_coordinator && f.action != fault_spec::kind::replan;
}

class run {
 public:
  run(const scenario& s, const run_options& o) : s_(s), o_(o) {}

  result<run_result> go();

 private:
  int64_t now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start_).count();
  }
  void say(const std::string& what, const std::string& line) {
    if (o_.on_event) o_.on_event("  " + fmt_ms(now_ms()) + "  " + what + "  " + line);
  }
  void on_cluster_event(const seen_event& e);
  bool due(size_t index, int64_t last_fault_ms);
  void probe_after(size_t index, int64_t from_ms);
  void start_probes_after_heals(fault_injector& inject);
  result<std::string> fire(size_t index, fault_injector& inject);
  void settle_and_measure(run_result& r);

  const scenario& s_;
  const run_options& o_;
  steady::time_point start_;
  std::string dir_;
  std::unique_ptr<cluster> cluster_;
  std::unique_ptr<driver> driver_;
  std::unique_ptr<oracle> oracle_;
  std::vector<request_spec> requests_;
  std::vector<std::string> expected_;
  std::vector<fault_result> faults_;
  std::vector<std::string> chosen_actors_;
  std::vector<std::thread> probes_;
  std::mutex probe_threads_mutex_;  // probes start from the main loop and the healer
  std::mutex probe_mutex_;          // faults_ and the probes' outcomes
  size_t fired_ = 0;                // faults struck so far
  std::vector<std::pair<request_spec, outcome>> probe_outcomes_;
  std::atomic<int> next_probe_{0};
  int64_t random_at_ms_ = -1;
  std::map<std::string, int64_t> baseline_rss_kb_;
  std::set<std::string> touched_nodes_;  // killed, restarted: not survivors
  std::set<size_t> untargeted_;          // faults that struck a node already down
};

void run::on_cluster_event(const seen_event& e) {
  static const std::set<std::string> shown = {
      "node_suspected",     "node_alive",           "node_lost",
      "node_rejoined",      "node_leaving",         "role_died",
      "role_restarted",     "role_adopted",         "role_unreachable",
      "role_moved_home",    "role_gave_up",         "migration_started",
      "migration_finished", "migration_rolled_back"};
  if (!shown.count(e.kind)) return;
  std::string what = e.kind;
  std::string who =
      e.actor.empty() ? "node " + e.node : e.actor + (e.node.empty() ? "" : " on " + e.node);
  if (e.kind.rfind("migration", 0) == 0) who = "";
  say("event    ",
      what + (who.empty() ? "" : " " + who) + (e.detail.empty() ? "" : ": " + e.detail));
}

// Records the heals of faults that struck, and probes after those measured from their end.
void run::start_probes_after_heals(fault_injector& inject) {
  std::vector<std::pair<size_t, int64_t>> start;
  {
    std::lock_guard<std::mutex> lock(probe_mutex_);
    for (size_t i = 0; i < fired_; ++i) {
      const int64_t healed = inject.healed_at(i);
      if (healed < 0 || faults_[i].healed_ms >= 0) continue;
      faults_[i].healed_ms = healed;
      if (expects_service(s_, i) && measured_from_end(s_.faults[i])) start.emplace_back(i, healed);
    }
  }
  for (const auto& [index, from] : start)
    probe_after(index, from);
}

// One short request after another until one is served: the time the cluster takes to serve
// again after fault `index` (measured from `from_ms`: the fault, or its end when it was timed).
// A probe goes out every 100 ms, each on its own thread, so that one stuck on a path that is
// gone (its answer never comes) does not hide the service coming back; the first served counts.
void run::probe_after(size_t index, int64_t from_ms) {
  std::lock_guard<std::mutex> threads_lock(probe_threads_mutex_);
  probes_.emplace_back([this, index, from_ms] {
    const int64_t give_up_ms = from_ms + 60000;
    auto served = std::make_shared<std::atomic<bool>>(false);
    std::vector<std::thread> wave;
    while (!*served && now_ms() < give_up_ms) {
      if (wave.size() >= 40) {  // bounded: the oldest must end before another starts
        wave.front().join();
        wave.erase(wave.begin());
      }
      wave.emplace_back([this, index, from_ms, served] {
        request_spec p = probe_request(1000000 + next_probe_++, oracle_->vocab());
        outcome o = driver_->send(p, std::chrono::milliseconds(5000));
        std::lock_guard<std::mutex> lock(probe_mutex_);
        probe_outcomes_.emplace_back(p, o);
        if (o.how == outcome::end::complete && !served->exchange(true)) {
          faults_[index].serve_again_ms = std::max<int64_t>(0, o.done_ms - from_ms);
        }
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : wave)
      t.join();
  });
}

bool run::due(size_t index, int64_t last_fault_ms) {
  const fault_time& t = s_.faults[index].time;
  switch (t.when) {
    case fault_time::kind::at:
      return now_ms() >= t.ms;
    case fault_time::kind::after:
      return last_fault_ms >= 0 && now_ms() >= last_fault_ms + t.ms;
    case fault_time::kind::tokens:
      // A workload done before that many tokens: the fault strikes at its end.
      return driver_->chunks() >= t.tokens || driver_->finished();
    case fault_time::kind::migration:
      return true;  // fire() starts the migration and strikes while it is in flight
    case fault_time::kind::random:
      if (random_at_ms_ < 0) {
        std::mt19937_64 rng(o_.seed * 31 + index);
        random_at_ms_ = t.from_ms + static_cast<int64_t>(
                                        rng() % static_cast<uint64_t>(t.to_ms - t.from_ms + 1));
      }
      return now_ms() >= random_at_ms_;
  }
  return true;
}

result<std::string> run::fire(size_t index, fault_injector& inject) {
  const fault_spec& f = s_.faults[index];
  if (f.time.when == fault_time::kind::migration) {
    if (status started = inject.start_migration(o_.seed + index); !started) {
      return error(started.err().code,
                   "the fault at 'migration' found none: " + started.err().message +
                       " (make migrations last: eplb.copy_interval_ms)");
    }
  }
  return inject.inject(index, f);
}

result<run_result> run::go() {
  run_result r;
  r.scenario = s_.name;
  r.source = s_.source;
  r.seed = o_.seed;
  dir_ = o_.workdir + "/" + s_.name + "-seed" + std::to_string(o_.seed);
  ::mkdir(o_.workdir.c_str(), 0755);
  std::string rm = "rm -rf '" + dir_ + "'";
  (void)std::system(rm.c_str());
  ::mkdir(dir_.c_str(), 0755);
  r.logs = dir_;
  auto model_dir = prepare_model(s_, o_.workdir);
  if (!model_dir) return model_dir.err();
  auto loaded = oracle::load(model_dir.value());
  if (!loaded) return loaded.err();
  oracle_ = std::move(loaded.value());
  workload_spec w = s_.workload;
  if (o_.soak) w.requests *= 10;
  auto made = make_requests(w, oracle_->vocab(), oracle_->max_positions(), o_.seed,
                            [this](const std::string& t) { return oracle_->encode(t); });
  if (!made) return made.err();
  requests_ = std::move(made.value());
  auto answers = oracle_->answers(requests_);
  if (!answers) return answers.err();
  expected_ = std::move(answers.value());
  cluster_options co;
  co.brigade = o_.brigade;
  co.workdir = dir_;
  co.api_key = "chaos-" + std::to_string(o_.seed);
  co.model_dir = model_dir.value();
  auto started = cluster::start(s_, co);
  if (!started) return started.err();
  cluster_ = std::move(started.value());
  start_ = steady::now();
  driver_ = std::make_unique<driver>(cluster_->host(), cluster_->http_port(), co.api_key,
                                     cluster_->model_name(), start_, std::chrono::seconds(60));
  // Warm up: the first request is served once every role is up.
  const request_spec warm = probe_request(999999, oracle_->vocab());
  bool warmed = false;
  for (int i = 0; i < 300 && !warmed; ++i) {
    warmed = driver_->send(warm, std::chrono::seconds(5)).how == outcome::end::complete;
    if (!warmed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!warmed) {
    return error(errc::unavailable, "the cluster never served its first request; see " + dir_);
  }
  if (s_.checks.memory_growth > 0) {
    // Growth is measured over a cluster that has already served a workload of this shape without
    // faults: one short probe leaves most of the workspaces and allocator arenas a full batch
    // touches for the first time, and on a busy machine that first touch alone passed 1.5x.
    // Different prompts (another seed), so the faulted run still prefills its own.
    // The scenario's own workload, not the soak's ten of it: a baseline needs one pass.
    auto warm_requests = make_requests(s_.workload, oracle_->vocab(), oracle_->max_positions(),
                                       o_.seed ^ 0x5741524dULL,
                                       [this](const std::string& t) { return oracle_->encode(t); });
    if (!warm_requests) return warm_requests.err();
    for (auto& q : warm_requests.value())
      q.arrival_ms = -1;
    driver_->start(std::move(warm_requests.value()), s_.workload.concurrency);
    driver_->join();
  }
  for (const auto& n : cluster_->nodes())
    baseline_rss_kb_[n] = cluster_->node_rss_kb(n);
  start_ = steady::now();
  driver_ = std::make_unique<driver>(cluster_->host(), cluster_->http_port(), co.api_key,
                                     cluster_->model_name(), start_, std::chrono::seconds(60));
  event_watch events(cluster_->host(), cluster_->http_port(), co.api_key, start_,
                     [this](const seen_event& e) { on_cluster_event(e); });
  fault_injector inject(
      *cluster_, o_.seed, [this] { return now_ms(); },
      [this](const std::string& line) { say("heal     ", line); });
  driver_->start(requests_, s_.workload.concurrency);
  // Heals on a thread of their own: injecting a fault may block (an admin call to a coordinator
  // that another fault stopped), and the heal that continues it must not wait behind it.
  std::atomic<bool> healing{true};
  std::thread healer([&] {
    while (healing) {
      if (inject.heal_due() > 0) start_probes_after_heals(inject);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  faults_.assign(s_.faults.size(), fault_result{});
  chosen_actors_.assign(s_.faults.size(), "");
  size_t next = 0;
  int64_t last_fault_ms = -1;
  auto last_progress = steady::now();
  // Faults strike in order; the run ends when the workload is done, every fault struck and every
  // timed one has run its course.
  while (!driver_->finished() || next < s_.faults.size() || now_ms() < inject.active_until()) {
    if (next < s_.faults.size() && due(next, last_fault_ms)) {
      const fault_spec& f = s_.faults[next];
      {
        std::lock_guard<std::mutex> lock(probe_mutex_);
        faults_[next].what = describe(f);
        faults_[next].at_ms = now_ms();
        faults_[next].from_end = measured_from_end(f);
        fired_ = next + 1;
      }
      // A fault on a node that is down already (killed earlier) has nothing to be noticed.
      const bool target_down = f.target.what == fault_target::kind::node &&
                               f.action != fault_spec::kind::restart &&
                               !cluster_->node_running(f.target.name);
      if (target_down) untargeted_.insert(next);
      auto done = fire(next, inject);
      {
        // When it struck: after whatever fire() waited for (a migration in flight).
        std::lock_guard<std::mutex> lock(probe_mutex_);
        faults_[next].at_ms = now_ms();
      }
      if (!done) {
        r.failures.push_back("fault " + std::to_string(next + 1) + " (" + describe(f) +
                             ") could not be injected: " + done.err().message);
      } else {
        say("fault    ", done.value());
      }
      if (f.target.what == fault_target::kind::node &&
          (f.action == fault_spec::kind::kill || f.action == fault_spec::kind::restart)) {
        touched_nodes_.insert(f.target.name);
      }
      chosen_actors_[next] = inject.chosen_actor();
      if (inject.coordinator_moved()) {
        driver_->retarget(cluster_->host(), cluster_->http_port());
        events.retarget(cluster_->http_port());
      }
      if (!measured_from_end(f) && expects_service(s_, next)) {
        probe_after(next, faults_[next].at_ms);
      }
      last_fault_ms = faults_[next].at_ms;
      random_at_ms_ = -1;
      ++next;
    }
    if (o_.on_progress && steady::now() - last_progress > std::chrono::milliseconds(250)) {
      last_progress = steady::now();
      o_.on_progress("[" + s_.name + "] " + std::to_string(driver_->done()) + "/" +
                     std::to_string(driver_->total()) + " requests, " +
                     std::to_string(driver_->chunks()) + " chunks, faults " + std::to_string(next) +
                     "/" + std::to_string(s_.faults.size()) + ", " + fmt_ms(now_ms()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  driver_->join();
  healing = false;
  healer.join();
  inject.heal_all();
  start_probes_after_heals(inject);
  for (auto& t : probes_)
    t.join();
  for (size_t i = 0; i < s_.faults.size(); ++i) {
    if (s_.faults[i].action == fault_spec::kind::term)
      faults_[i].exit_ms = inject.exit_ms(i, 15000);
  }
  settle_and_measure(r);
  // The coordinator pushes events every 200 ms: let the last ones arrive.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  // Detection, from the events the coordinator recorded.
  const auto seen = events.events();
  for (size_t i = 0; i < s_.faults.size(); ++i) {
    fault_result& fr = faults_[i];
    if (!noticeable(s_.faults[i]) || fr.at_ms < 0 || untargeted_.count(i)) continue;
    fr.detected = false;
    for (const auto& e : seen) {
      if (e.at_ms + 50 < fr.at_ms) continue;  // the coordinator's clock stamps, a hair apart
      if (!counts_as_detection(s_.faults[i], chosen_actors_[i], e)) continue;
      fr.detected = true;
      fr.detect_ms =
          std::max<int64_t>(0, e.at_ms - kill_lands_at(s_, faults_, i, chosen_actors_[i], seen));
      fr.noticed_as = e.kind;
      break;
    }
    // A node the coordinator already had out of contact (lost or stopped, not yet back: a fault
    // right after a restart, before the node could rejoin) has nothing left to be noticed by.
    const fault_spec& f = s_.faults[i];
    if (!fr.detected && f.target.what == fault_target::kind::node &&
        f.action != fault_spec::kind::restart && out_of_contact_at(seen, f.target.name, fr.at_ms)) {
      fr.detected = true;
      fr.detect_ms = 0;
      fr.noticed_as = "already out of contact";
    }
  }
  r.faults = faults_;
  r.duration_ms = now_ms();
  std::vector<std::pair<request_spec, outcome>> probes;
  {
    std::lock_guard<std::mutex> lock(probe_mutex_);
    probes = probe_outcomes_;
  }
  std::vector<request_spec> probe_requests;
  for (const auto& p : probes)
    probe_requests.push_back(p.first);
  auto probe_expected = oracle_->answers(probe_requests);
  if (!probe_expected) return probe_expected.err();
  judge(s_, requests_, expected_, driver_->outcomes(), probes, probe_expected.value(), r);
  return r;
}

// Waits for the cluster to be idle and whole again (every running node alive, no request in
// flight), then reads the pools and the nodes' memory.
void run::settle_and_measure(run_result& r) {
  const auto deadline = steady::now() + std::chrono::seconds(20);
  nlohmann::json status;
  while (steady::now() < deadline) {
    auto body = cluster_->get("/v1/status");
    if (body) {
      status = nlohmann::json::parse(body.value(), nullptr, false);
      bool idle = status.is_array();
      for (const auto& s : status) {
        const std::string role = s.value("role", "");
        if ((role == "router" || role == "decode" || role == "prefill") &&
            (s.value("in_flight", 0) != 0 || s.value("queue_depth", 0) != 0)) {
          idle = false;
        }
        const auto& d = s.contains("detail") ? s["detail"] : nlohmann::json();
        if (role == "node" && d.is_object() && d.value("state", "") != "alive" &&
            cluster_->node_running(s.value("name", ""))) {
          idle = false;
        }
      }
      if (idle) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  check_pools(status, r);
  for (const auto& [node, before] : baseline_rss_kb_) {
    if (touched_nodes_.count(node) || before <= 0) continue;
    const int64_t after = cluster_->node_rss_kb(node);
    if (after <= 0 || double(after) / double(before) <= r.memory_growth) continue;
    r.memory_growth = double(after) / double(before);
    r.memory_growth_node = node + ", " + std::to_string(before / 1024) + " -> " +
                           std::to_string(after / 1024) + " MiB";
  }
}

}  // namespace

// A kill goes to its actor through the coordinator (POST /v1/admin/kill); while the actor's node
// is cut off from the coordinator's control plane, or stopped (SIGSTOP), the kill waits until
// the cut heals or the node runs again, and nothing has happened to notice before then (chaos
// --random 1 --random-from 9 --seed 9191: a shard killed 5 ms into a 3 s cut of its node died, and
// was noticed, 4 ms after the heal). Its node is the one the events name for it.
int64_t kill_lands_at(const scenario& s, const std::vector<fault_result>& faults, size_t index,
                      const std::string& actor, const std::vector<seen_event>& seen) {
  const fault_spec& kill = s.faults[index];
  int64_t at = faults[index].at_ms;
  const bool actor_kill =
      kill.action == fault_spec::kind::kill && (kill.target.what == fault_target::kind::role ||
                                                kill.target.what == fault_target::kind::actor);
  if (!actor_kill || actor.empty()) return at;
  std::string node;
  for (const seen_event& e : seen) {
    if (e.at_ms + 50 >= at && e.actor == actor && !e.node.empty()) {
      node = e.node;
      break;
    }
  }
  if (node.empty()) return at;
  int64_t lands = at;
  for (size_t j = 0; j < s.faults.size() && j < faults.size(); ++j) {
    const fault_spec& cut = s.faults[j];
    const fault_result& r = faults[j];
    const bool on_node = cut.target.what == fault_target::kind::node && cut.target.name == node;
    const bool cuts_control = cut.action == fault_spec::kind::partition && cut.plane != "data" &&
                              (cut.from == "coordinator" || cut.from == "all");
    const bool holds = on_node && (cuts_control || cut.action == fault_spec::kind::stop);
    if (holds && r.at_ms >= 0 && r.at_ms <= at && r.healed_ms > at) {
      lands = std::max(lands, r.healed_ms);
    }
  }
  return lands;
}

result<run_result> run_scenario(const scenario& s, const run_options& options) {
  run one(s, options);
  return one.go();
}

}  // namespace brigade::chaos

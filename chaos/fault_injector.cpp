#include "chaos/fault_injector.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace brigade::chaos {
namespace {

// The live actors of a role kind, from the registry.
std::vector<std::string> live_actors(const cluster& c, const std::string& role) {
  std::vector<std::string> out;
  auto body = c.get("/v1/actors");
  if (!body) return out;
  const auto j = nlohmann::json::parse(body.value(), nullptr, false);
  if (!j.is_object() || !j.contains("actors")) return out;
  for (const auto& a : j["actors"]) {
    if (a.value("role", "") == role && a.value("alive", false)) out.push_back(a.value("name", ""));
  }
  return out;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    if (e->d_type == DT_DIR) {
      for (auto& f : files_in(path))
        out.push_back(std::move(f));
    } else {
      out.push_back(path);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Fills the file system under `dir` until it refuses a write: a full disk, for real.
std::string fill_disk(const std::string& dir) {
  const std::string path = dir + "/chaos-filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  std::vector<char> chunk(1 << 16, 'x');
  while (::write(fd, chunk.data(), chunk.size()) > 0) {
  }
  ::close(fd);
  return path;
}

}  // namespace

fault_injector::fault_injector(cluster& c, uint64_t seed, std::function<int64_t()> now_ms,
                               std::function<void(const std::string&)> on_event)
    : cluster_(c),
      random_(seed * 0x2545f4914f6cdd1dULL + 7),
      now_ms_(std::move(now_ms)),
      on_event_(std::move(on_event)) {}

void fault_injector::add_timed(int64_t for_ms, std::function<void()> heal) {
  std::lock_guard<std::mutex> lock(timed_mutex_);
  timed t;
  t.index = current_;
  t.until_ms = for_ms > 0 ? now_ms_() + for_ms : 0;
  t.heal = std::move(heal);
  timed_.push_back(std::move(t));
}

int fault_injector::heal_due() {
  // The heals run outside the lock: one may take a while (a signal, an admin call).
  std::vector<std::pair<size_t, std::function<void()>>> due;
  {
    std::lock_guard<std::mutex> lock(timed_mutex_);
    const int64_t now = now_ms_();
    for (auto& t : timed_) {
      if (t.done || t.until_ms == 0 || t.until_ms > now) continue;
      t.done = true;
      due.emplace_back(t.index, t.heal);
    }
  }
  for (auto& [index, heal] : due) {
    heal();
    std::lock_guard<std::mutex> lock(timed_mutex_);
    if (healed_at_.size() <= index) healed_at_.resize(index + 1, -1);
    healed_at_[index] = now_ms_();
  }
  return static_cast<int>(due.size());
}

void fault_injector::heal_all() {
  std::vector<std::pair<size_t, std::function<void()>>> left;
  {
    std::lock_guard<std::mutex> lock(timed_mutex_);
    for (auto& t : timed_) {
      if (t.done) continue;
      t.done = true;
      left.emplace_back(t.index, t.heal);
    }
  }
  for (auto& [index, heal] : left) {
    heal();
    std::lock_guard<std::mutex> lock(timed_mutex_);
    if (healed_at_.size() <= index) healed_at_.resize(index + 1, -1);
    healed_at_[index] = now_ms_();
  }
}

int64_t fault_injector::active_until() const {
  std::lock_guard<std::mutex> lock(timed_mutex_);
  int64_t until = -1;
  for (const auto& t : timed_) {
    if (!t.done && t.until_ms > 0) until = std::max(until, t.until_ms);
  }
  return until;
}

int64_t fault_injector::healed_at(size_t index) const {
  std::lock_guard<std::mutex> lock(timed_mutex_);
  return index < healed_at_.size() ? healed_at_[index] : -1;
}

status fault_injector::admin_fault(const std::string& node, const std::string& kind,
                                   const std::string& peer, double rate, int64_t ms,
                                   int64_t for_ms) {
  nlohmann::json j{{"node", node},
                   {"kind", kind},
                   {"rate", rate},
                   {"for_ms", for_ms},
                   {"seed", random_() % 1000000}};
  if (!peer.empty()) j["peer"] = peer;
  if (ms > 0) j["ms"] = ms;
  // A node out of contact (an earlier fault) takes no rules until it is back: wait a while.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  auto r = cluster_.post("/v1/admin/faults", j.dump());
  while (!r && r.err().message.find("not in contact") != std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = cluster_.post("/v1/admin/faults", j.dump());
  }
  if (!r) return r.err();
  return ok_status();
}

status fault_injector::start_migration(uint64_t seed) {
  // Refused while another migration runs or a shard is down (an earlier fault): try again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto started = cluster_.post("/v1/admin/replan", nlohmann::json{{"seed", seed}}.dump());
  while (!started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    started = cluster_.post("/v1/admin/replan", nlohmann::json{{"seed", seed}}.dump());
  }
  if (!started) return started.err();
  // A migration may end (roll back) before it is seen: one more is started then.
  auto again = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < deadline) {
    auto experts = cluster_.get("/v1/experts");
    if (experts) {
      const auto j = nlohmann::json::parse(experts.value(), nullptr, false);
      if (j.is_object() && j.contains("migration") && !j["migration"].is_null()) {
        return ok_status();
      }
    }
    if (std::chrono::steady_clock::now() > again) {
      (void)cluster_.post("/v1/admin/replan", nlohmann::json{{"seed", seed + 1}}.dump());
      again = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return error(errc::unavailable, "no migration was seen in flight within 10 s");
}

result<std::string> fault_injector::inject(size_t index, const fault_spec& f) {
  current_ = index;
  chosen_actor_.clear();
  switch (f.action) {
    case fault_spec::kind::kill:
      return kill(f);
    case fault_spec::kind::stop:
      return stop(f);
    case fault_spec::kind::term:
      return term(f);
    case fault_spec::kind::partition:
      return partition(f);
    case fault_spec::kind::network:
      return network(f);
    case fault_spec::kind::disk:
      return disk(f);
    case fault_spec::kind::restart:
      return restart(f);
    case fault_spec::kind::replan: {
      auto r = cluster_.post("/v1/admin/replan", nlohmann::json{{"seed", f.replan_seed}}.dump());
      if (!r) return r.err();
      return std::string("re-plan started (seed ") + std::to_string(f.replan_seed) + ")";
    }
  }
  return error(errc::internal, "unknown fault");
}

result<std::string> fault_injector::kill(const fault_spec& f) {
  switch (f.target.what) {
    case fault_target::kind::coordinator: {
      if (status s = cluster_.signal_coordinator(SIGKILL); !s) return s.err();
      return std::string("SIGKILL to the coordinator");
    }
    case fault_target::kind::node: {
      const pid_t pid = cluster_.node_pid(f.target.name);
      if (status s = cluster_.signal_node(f.target.name, SIGKILL); !s) return s.err();
      return "SIGKILL to node " + f.target.name + " (pid " + std::to_string(pid) + ")";
    }
    case fault_target::kind::role:
    case fault_target::kind::actor: {
      std::string actor = f.target.name;
      if (f.target.what == fault_target::kind::role) {
        // Every one of them may be restarting at this moment (an earlier fault): wait a while.
        std::vector<std::string> live;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while ((live = live_actors(cluster_, f.target.name)).empty() &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (live.empty()) return error(errc::not_found, "no live " + f.target.name + " to kill");
        actor = live[random_() % live.size()];
      }
      auto r = cluster_.post("/v1/admin/kill", nlohmann::json{{"actor", actor}}.dump());
      // It may have died meanwhile (restarting after an earlier fault): one more try.
      if (!r && f.target.what == fault_target::kind::role) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const auto live = live_actors(cluster_, f.target.name);
        if (!live.empty()) {
          actor = live[random_() % live.size()];
          r = cluster_.post("/v1/admin/kill", nlohmann::json{{"actor", actor}}.dump());
        }
      }
      if (!r) return r.err();
      chosen_actor_ = actor;
      return "killed actor " + actor;
    }
  }
  return error(errc::internal, "unknown target");
}

result<std::string> fault_injector::stop(const fault_spec& f) {
  const bool coordinator = f.target.what == fault_target::kind::coordinator;
  const std::string name = f.target.name;
  const status s =
      coordinator ? cluster_.signal_coordinator(SIGSTOP) : cluster_.signal_node(name, SIGSTOP);
  if (!s) return s.err();
  add_timed(f.for_ms, [this, coordinator, name] {
    (void)(coordinator ? cluster_.signal_coordinator(SIGCONT)
                       : cluster_.signal_node(name, SIGCONT));
    if (on_event_)
      on_event_("SIGCONT to " + (coordinator ? std::string("the coordinator") : "node " + name));
  });
  return "SIGSTOP to " + (coordinator ? std::string("the coordinator") : "node " + name);
}

// Whether `pid` has exited (gone, or a zombie its parent has not reaped yet).
static bool exited(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return true;
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z';
}

result<std::string> fault_injector::term(const fault_spec& f) {
  const bool coordinator = f.target.what == fault_target::kind::coordinator;
  const pid_t pid = coordinator ? cluster_.coordinator_pid() : cluster_.node_pid(f.target.name);
  if (pid <= 0) return error(errc::not_found, "no process to stop");
  const status s = coordinator ? cluster_.signal_coordinator(SIGTERM)
                               : cluster_.signal_node(f.target.name, SIGTERM);
  if (!s) return s.err();
  const size_t index = current_;
  {
    std::lock_guard<std::mutex> lock(exit_mutex_);
    exits_[index] = -1;
  }
  const auto sent = std::chrono::steady_clock::now();
  waiters_.emplace_back([this, index, pid, sent] {
    while (std::chrono::steady_clock::now() - sent < std::chrono::seconds(60)) {
      if (exited(pid)) {
        std::lock_guard<std::mutex> lock(exit_mutex_);
        exits_[index] = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - sent)
                            .count();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  return "SIGTERM to " + (coordinator ? std::string("the coordinator") : "node " + f.target.name) +
         " (pid " + std::to_string(pid) + ")";
}

int64_t fault_injector::exit_ms(size_t index, int64_t wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(exit_mutex_);
      auto it = exits_.find(index);
      if (it == exits_.end()) return -1;
      if (it->second >= 0 || std::chrono::steady_clock::now() >= deadline) return it->second;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

fault_injector::~fault_injector() {
  for (auto& w : waiters_)
    w.join();
}

// A node cut off: the control plane through its proxy (only the coordinator talks to a node on
// it), the data plane by drop rules on both ends of each link. The data-plane rules go first,
// while the coordinator can still reach the node.
result<std::string> fault_injector::partition(const fault_spec& f) {
  const std::string node = f.target.name;
  const bool control = f.plane != "data";
  const bool data = f.plane != "control";
  std::string note;
  if (data) {
    const std::string peer = f.from == "coordinator" || f.from == "all" ? "*" : f.from;
    status s = admin_fault(node, "partition", peer, 1.0, 0, f.for_ms);
    // Cut off already (another fault holds its control plane): the control cut still applies.
    if (!s && !control) return s.err();
    if (!s) note = " (its data plane kept: " + s.err().message + ")";
    add_timed(f.for_ms, [this, node] {
      if (!cluster_.post("/v1/admin/faults",
                         nlohmann::json{{"node", node}, {"kind", "clear"}}.dump())) {
        // The rules end by themselves after for_ms; a failed clear only matters at the end.
      }
    });
  }
  if (control) {
    cluster_.set_control(node, proxy_mode::partition);
    add_timed(f.for_ms, [this, node] {
      cluster_.set_control(node, proxy_mode::pass);
      if (on_event_) on_event_("control plane of node " + node + " healed");
    });
  }
  return describe(f) + note;
}

result<std::string> fault_injector::network(const fault_spec& f) {
  const std::string node = f.target.name;
  const std::string peer = f.from == "coordinator" || f.from == "all" ? "*" : f.from;
  const int64_t lasting = f.for_ms;
  if (f.drop > 0) {
    if (status s = admin_fault(node, "drop", peer, f.drop, 0, lasting); !s) return s.err();
  }
  if (f.duplicate > 0) {
    if (status s = admin_fault(node, "duplicate", peer, f.duplicate, 0, lasting); !s) {
      return s.err();
    }
  }
  if (f.reorder > 0) {
    const int64_t ms = f.delay_ms > 0 ? f.delay_ms : 20;
    if (status s = admin_fault(node, "reorder", peer, f.reorder, ms, lasting); !s) return s.err();
  }
  if (f.delay_ms > 0 && f.reorder == 0) {
    if (status s = admin_fault(node, "delay", peer, 1.0, f.delay_ms, lasting); !s) return s.err();
  }
  add_timed(lasting, [this, node] {
    (void)cluster_.post("/v1/admin/faults",
                        nlohmann::json{{"node", node}, {"kind", "clear"}}.dump());
  });
  return describe(f);
}

result<std::string> fault_injector::disk(const fault_spec& f) {
  const std::string node = f.target.name;
  const std::string dir = cluster_.ssd_dir(node);
  if (f.disk_corrupt_blocks > 0) {
    auto files = files_in(dir);
    int corrupted = 0;
    for (size_t i = 0; i < files.size() && corrupted < f.disk_corrupt_blocks; ++i) {
      const std::string& path = files[(i + random_() % files.size()) % files.size()];
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      if (!file) continue;
      file.seekg(0, std::ios::end);
      const auto size = static_cast<int64_t>(file.tellg());
      if (size < 80) continue;
      const int64_t at = 64 + static_cast<int64_t>(random_() % static_cast<uint64_t>(size - 64));
      file.seekg(at);
      char byte = 0;
      file.read(&byte, 1);
      byte = static_cast<char>(byte ^ 0x5a);
      file.seekp(at);
      file.write(&byte, 1);
      ++corrupted;
    }
    return "corrupted " + std::to_string(corrupted) + " of " + std::to_string(files.size()) +
           " SSD block files of node " + node;
  }
  if (f.disk_full && cluster_.ssd_mounted(node)) {
    const std::string filler = fill_disk(dir);
    add_timed(f.for_ms, [filler] {
      if (!filler.empty()) ::unlink(filler.c_str());
    });
    return "filled node " + node + "'s SSD file system (a real full disk)";
  }
  const std::string kind = f.disk_full ? "disk_full" : "disk_slow";
  if (status s = admin_fault(node, kind, "", 1.0, f.disk_slow_ms, f.for_ms); !s) return s.err();
  add_timed(f.for_ms, [this, node] {
    (void)cluster_.post("/v1/admin/faults",
                        nlohmann::json{{"node", node}, {"kind", "clear"}}.dump());
  });
  return describe(f) + (f.disk_full ? " (the disk fault point: no small file system mounted)" : "");
}

result<std::string> fault_injector::restart(const fault_spec& f) {
  if (f.target.what == fault_target::kind::coordinator) {
    if (status s = cluster_.restart_coordinator(); !s) return s.err();
    coordinator_moved_ = true;
    return "restarted the coordinator (now at port " + std::to_string(cluster_.http_port()) + ")";
  }
  if (status s = cluster_.restart_node(f.target.name); !s) return s.err();
  return "restarted node " + f.target.name + " under its name (pid " +
         std::to_string(cluster_.node_pid(f.target.name)) + ")";
}

}  // namespace brigade::chaos

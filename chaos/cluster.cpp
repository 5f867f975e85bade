#include "chaos/cluster.hpp"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "chaos/deadline_guard.hpp"
#include "serve/http_client.hpp"

namespace brigade::chaos {
namespace {

constexpr std::chrono::seconds start_timeout{120};

std::string random_text(size_t n) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += alphabet[rd() % (sizeof alphabet - 1)];
  return out;
}

status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return error(errc::io_error, "cannot write " + path);
  return ok_status();
}

// Reads the child's lines until one matches `pattern`; its first group, or an error naming the
// log to read.
result<std::string> wait_for_line(subprocess& p, const std::regex& pattern, const std::string& what,
                                  const std::string& log) {
  const auto deadline = std::chrono::steady_clock::now() + start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto line = p.read_line(std::chrono::milliseconds(500));
    if (!line) {
      if (line.err().code == errc::io_error ||
          line.err().message.find("end") != std::string::npos) {
        break;
      }
      continue;
    }
    std::smatch m;
    if (std::regex_search(line.value(), m, pattern)) return m[1].str();
  }
  return error(errc::unavailable, what + " did not start; see " + log);
}

}  // namespace

result<std::unique_ptr<cluster>> cluster::start(const scenario& s, cluster_options options) {
  std::unique_ptr<cluster> c(new cluster());
  c->options_ = std::move(options);
  const std::string secret = c->options_.workdir + "/secret";
  if (status w = write_file(secret, "chaos-" + random_text(24) + "\n"); !w) return w.err();
  c->names_ = node_names(s);
  // The coordinator dials the proxies; what the nodes themselves listen on stays private.
  std::vector<std::string> addresses;
  for (const auto& name : c->names_) {
    node_process& n = c->nodes_[name];
    n.name = name;
    n.dir = c->options_.workdir + "/" + name;
    ::mkdir(n.dir.c_str(), 0755);
    ::mkdir((n.dir + "/ssd").c_str(), 0755);
    if (s.topology.ssd_fs_bytes > 0 && ::geteuid() == 0) {
      const std::string opts = "size=" + std::to_string(s.topology.ssd_fs_bytes);
      n.mounted = ::mount("tmpfs", (n.dir + "/ssd").c_str(), "tmpfs", 0, opts.c_str()) == 0;
    }
  }
  auto manifest_yaml = std::string();
  // Ports first: the manifest names the proxies, which need the nodes' ports.
  for (const auto& name : c->names_) {
    node_process& n = c->nodes_[name];
    if (status started = c->start_node(n, 0); !started) return started.err();
    proxy_options po;
    po.target_port = n.port;
    auto proxy = tcp_proxy::start(po);
    if (!proxy) return proxy.err();
    n.proxy = std::move(proxy.value());
    addresses.push_back("127.0.0.1:" + std::to_string(n.proxy->port()));
  }
  auto m = complete_manifest(s, c->options_.model_dir, addresses, secret, c->options_.api_key,
                             &manifest_yaml);
  if (!m) return m.err();
  c->heartbeat_ms_ = m->liveness.heartbeat_ms;
  c->dead_after_ms_ = m->liveness.dead_after_ms;
  // Nodes run with the manifest's liveness too (they were started before it was known only
  // with the defaults; restart them now if those differ).
  c->manifest_path_ = c->options_.workdir + "/manifest.yaml";
  if (status w = write_file(c->manifest_path_, manifest_yaml); !w) return w.err();
  if (m->liveness.heartbeat_ms != 200 || m->liveness.dead_after_ms != 3000) {
    for (const auto& name : c->names_) {
      node_process& n = c->nodes_[name];
      (void)n.proc->kill(SIGKILL);
      (void)n.proc->wait(std::chrono::seconds(10));
      if (status again = c->start_node(n, n.port); !again) return again.err();
    }
  }
  if (status started = c->start_coordinator(); !started) return started.err();
  return c;
}

cluster::~cluster() {
  if (coordinator_) {
    (void)coordinator_->kill(SIGCONT);
    (void)coordinator_->kill(SIGKILL);
  }
  for (auto& [name, n] : nodes_) {
    if (n.proc) {
      (void)n.proc->kill(SIGCONT);
      (void)n.proc->kill(SIGKILL);
      (void)n.proc->wait(std::chrono::seconds(10));
    }
    n.proxy.reset();
    if (n.mounted) ::umount2((n.dir + "/ssd").c_str(), MNT_DETACH);
  }
}

status cluster::start_node(node_process& n, uint16_t port) {
  subprocess::options o;
  o.argv = {options_.brigade,
            "node",
            "--listen",
            "127.0.0.1:" + std::to_string(port),
            "--join-secret-file",
            options_.workdir + "/secret",
            "--name",
            n.name,
            "--heartbeat-ms",
            std::to_string(heartbeat_ms_),
            "--dead-after-ms",
            std::to_string(dead_after_ms_)};
  o.stderr_path = options_.workdir + "/" + n.name + ".log";
  o.working_dir = n.dir;
  o.env = {{"UCX_NET_DEVICES", "lo"}};
  auto p = subprocess::spawn(o);
  if (!p) return p.err();
  n.proc = std::move(p.value());
  auto listening = wait_for_line(*n.proc, std::regex(R"(listening on \S+:(\d+))"), "node " + n.name,
                                 o.stderr_path);
  if (!listening) return listening.err();
  n.port = static_cast<uint16_t>(std::stoi(listening.value()));
  return ok_status();
}

status cluster::start_coordinator() {
  subprocess::options o;
  o.argv = {options_.brigade,    "serve", manifest_path_,     "--listen", "127.0.0.1:0",
            "--drain-timeout-s", "1",     "--stop-timeout-s", "5"};
  o.stderr_path = options_.workdir + "/coordinator.log";
  o.working_dir = options_.workdir;
  auto p = subprocess::spawn(o);
  if (!p) return p.err();
  coordinator_ = std::move(p.value());
  auto url = wait_for_line(*coordinator_, std::regex(R"( at http://[^:]+:(\d+))"),
                           "the coordinator", o.stderr_path);
  if (!url) return url.err();
  http_port_ = static_cast<uint16_t>(std::stoi(url.value()));
  auto models = get("/v1/models");
  if (!models) return models.err();
  const auto j = nlohmann::json::parse(models.value(), nullptr, false);
  if (j.is_object() && j.contains("data") && !j["data"].empty()) {
    model_name_ = j["data"][0].value("id", std::string("model"));
  }
  return ok_status();
}

status cluster::signal_node(const std::string& name, int signal) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.proc) return error(errc::not_found, "no node " + name);
  return it->second.proc->kill(signal);
}

bool cluster::node_running(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.proc) return false;
  return !it->second.proc->wait(std::chrono::milliseconds(0)).ok();
}

status cluster::restart_node(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return error(errc::not_found, "no node " + name);
  node_process& n = it->second;
  if (n.proc) {
    (void)n.proc->kill(SIGCONT);
    (void)n.proc->kill(SIGKILL);
    (void)n.proc->wait(std::chrono::seconds(10));
  }
  return start_node(n, n.port);
}

pid_t cluster::node_pid(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() || !it->second.proc ? -1 : it->second.proc->pid();
}

int64_t cluster::node_rss_kb(const std::string& name) const {
  const pid_t pid = node_pid(name);
  if (pid < 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

void cluster::set_control(const std::string& name, proxy_mode mode) {
  auto it = nodes_.find(name);
  if (it != nodes_.end() && it->second.proxy) it->second.proxy->set_mode(mode);
}

std::string cluster::ssd_dir(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? "" : it->second.dir + "/ssd";
}

bool cluster::ssd_mounted(const std::string& name) const {
  auto it = nodes_.find(name);
  return it != nodes_.end() && it->second.mounted;
}

status cluster::signal_coordinator(int signal) {
  if (!coordinator_) return error(errc::not_found, "no coordinator");
  return coordinator_->kill(signal);
}

bool cluster::coordinator_running() {
  return coordinator_ && !coordinator_->wait(std::chrono::milliseconds(0)).ok();
}

status cluster::restart_coordinator() {
  if (coordinator_) {
    (void)coordinator_->kill(SIGCONT);
    (void)coordinator_->kill(SIGKILL);
    (void)coordinator_->wait(std::chrono::seconds(10));
  }
  return start_coordinator();
}

// The coordinator may be stopped or gone: no call waits longer than this.
constexpr std::chrono::seconds api_timeout{5};

result<std::string> cluster::get(const std::string& target) const {
  serve::http_client client(host_, http_port_);
  deadline_guard guard(client, api_timeout);
  auto r = client.request("GET", target, "", {{"Authorization", "Bearer " + options_.api_key}});
  if (!r) return r.err();
  if (r->status != 200) {
    return error(errc::unavailable,
                 "GET " + target + ": " + std::to_string(r->status) + " " + r->body.substr(0, 200));
  }
  return r->body;
}

result<std::string> cluster::post(const std::string& target, const std::string& json) const {
  serve::http_client client(host_, http_port_);
  deadline_guard guard(client, api_timeout);
  auto r = client.request("POST", target, json, {{"Authorization", "Bearer " + options_.api_key}});
  if (!r) return r.err();
  if (r->status >= 300) {
    return error(errc::invalid_argument, "POST " + target + ": " + std::to_string(r->status) + " " +
                                             r->body.substr(0, 300));
  }
  return r->body;
}

}  // namespace brigade::chaos

// The processes of a chaos run: a `brigade node` per node of the scenario's topology, each behind
// a TCP fault proxy that the coordinator dials (so that its control plane can be cut), and the
// coordinator, `brigade serve` with the completed manifest. Every process logs to a file of its
// own under the run's directory; faults act on them with real signals.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chaos/scenario.hpp"
#include "chaos/tcp_proxy.hpp"
#include "common/result.hpp"
#include "common/subprocess.hpp"

namespace brigade::chaos {

struct cluster_options {
  std::string brigade;  ///< The brigade executable the processes run.
  std::string workdir;  ///< Logs, manifest, secret, the nodes' working directories.
  std::string api_key;
  std::string model_dir;
};

class cluster {
 public:
  /// Starts the nodes and their proxies, writes the manifest and starts the coordinator; returns
  /// once the coordinator serves HTTP.
  static result<std::unique_ptr<cluster>> start(const scenario& s, cluster_options options);
  /// Kills every process still running and unmounts what it mounted.
  ~cluster();

  const std::vector<std::string>& nodes() const { return names_; }
  bool has_node(const std::string& name) const { return nodes_.count(name) > 0; }
  /// Sends `signal` to a node's process (SIGKILL, SIGSTOP, SIGCONT, SIGTERM).
  status signal_node(const std::string& name, int signal);
  /// Starts a node again under its name and port (after it was killed); waits until it listens.
  status restart_node(const std::string& name);
  bool node_running(const std::string& name);
  pid_t node_pid(const std::string& name) const;
  /// The node's resident memory in KiB, or -1 when it does not run.
  int64_t node_rss_kb(const std::string& name) const;
  /// The control plane between the coordinator and the node: pass or partition (both ways).
  void set_control(const std::string& name, proxy_mode mode);
  /// The node's SSD directory (under its working directory).
  std::string ssd_dir(const std::string& name) const;
  /// Whether a small file system was mounted there (a real full disk).
  bool ssd_mounted(const std::string& name) const;

  status signal_coordinator(int signal);
  pid_t coordinator_pid() const { return coordinator_ ? coordinator_->pid() : -1; }
  /// Starts the coordinator again (after it was killed); waits until it serves HTTP.
  status restart_coordinator();
  bool coordinator_running();
  const std::string& host() const { return host_; }
  uint16_t http_port() const { return http_port_; }
  /// The served model's name, for requests.
  const std::string& model_name() const { return model_name_; }
  const std::string& workdir() const { return options_.workdir; }

  /// GET or POST on the coordinator's API with the run's key; the body, or an error.
  result<std::string> get(const std::string& target) const;
  result<std::string> post(const std::string& target, const std::string& json) const;

 private:
  struct node_process {
    std::string name;
    uint16_t port = 0;  ///< Where its agent listens (the proxy forwards there).
    std::string dir;
    std::optional<subprocess> proc;
    std::unique_ptr<tcp_proxy> proxy;
    bool mounted = false;
  };
  cluster() = default;
  status start_node(node_process& n, uint16_t port);
  status start_coordinator();

  cluster_options options_;
  std::vector<std::string> names_;
  std::map<std::string, node_process> nodes_;
  std::optional<subprocess> coordinator_;
  std::string manifest_path_;
  std::string host_ = "127.0.0.1";
  uint16_t http_port_ = 0;
  std::string model_name_;
  int heartbeat_ms_ = 200;
  int dead_after_ms_ = 3000;
};

}  // namespace brigade::chaos

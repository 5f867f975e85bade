// A fault scenario: a topology to deploy, a workload to drive through it, a schedule of faults to
// inject into the real processes, and the checks that must hold (docs/chaos.md has the format).
// Read from YAML like manifests: every field is checked and errors name it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "config/manifest.hpp"
#include "model/model_writer.hpp"

namespace brigade::chaos {

/// The cluster: a manifest (its nodes' addresses are the runner's to fill in) and its model.
struct topology_spec {
  /// The manifest as YAML text, nodes without addresses allowed; the runner completes it.
  std::string manifest_yaml;
  /// Nodes to start when the manifest lists none: its roles are spread over them in turn.
  int nodes = 0;
  /// A checkpoint directory, or empty to make one from `make` (a small random model).
  std::string model_dir;
  model::model_spec make;
  /// A small file system of this size mounted under each KV store's SSD directory, so that a
  /// full disk is a real one (0: none; needs root, else the disk fault point stands in).
  uint64_t ssd_fs_bytes = 0;
};

/// The requests and how they arrive.
struct workload_spec {
  enum class source { generated, file, trace };
  source prompts = source::generated;
  std::string path;  ///< file: JSON lines of token-id arrays or strings; trace: Mooncake JSONL.
  int requests = 24;
  int concurrency = 8;    ///< Requests in flight at once (closed loop).
  double rate_per_s = 0;  ///< > 0: open loop, Poisson arrivals at this rate instead.
  int min_prompt_tokens = 4;
  int max_prompt_tokens = 32;
  int shared_prefix_tokens = 0;  ///< Tokens every prompt starts with (agents resend context).
  int max_tokens = 64;
  enum class sampling { greedy, seeded, mixed };
  sampling draw = sampling::greedy;
  double temperature = 0.8;
  double top_p = 0.95;
  std::string scenario = "chat";  ///< The cache's traffic class.
  enum class streaming { yes, no, mixed };
  streaming stream = streaming::yes;
  int trace_block_tokens = 8;     ///< trace: tokens per hash id (the trace's are 512).
  double trace_time_scale = 0.0;  ///< trace: > 0 replays arrival times scaled by it.
};

/// When a fault strikes.
struct fault_time {
  enum class kind { at, after, tokens, migration, random };
  kind when = kind::at;
  int64_t ms = 0;       ///< at: since the workload started; after: since the previous fault.
  int64_t tokens = 0;   ///< tokens: once this many tokens reached clients in all.
  int64_t from_ms = 0;  ///< random: uniform in [from_ms, to_ms], drawn from the seed.
  int64_t to_ms = 0;
};

/// What a fault hits.
struct fault_target {
  enum class kind { node, role, actor, coordinator };
  kind what = kind::node;
  std::string name;  ///< A node name, a role kind (prefill, decode, expert_shard, kv_store) or
                     ///< an actor name; empty for the coordinator.
};

struct fault_spec {
  enum class kind { kill, stop, term, partition, network, disk, restart, replan };
  kind action = kind::kill;
  fault_time time;
  fault_target target;
  int64_t for_ms = 0;  ///< stop, partition, network, disk: how long; 0 until the run ends.
  /// partition: which plane(s), and from what: "coordinator", another node, or "all".
  std::string plane = "both";
  std::string from = "coordinator";
  /// network: data-plane messages to or from the node (to `from` when it names a node).
  double drop = 0, duplicate = 0, reorder = 0;
  int64_t delay_ms = 0;
  /// disk: the node's SSD tier.
  bool disk_full = false;
  int64_t disk_slow_ms = 0;
  int disk_corrupt_blocks = 0;
  uint64_t replan_seed = 1;
  std::string text;  ///< How the scenario file wrote it, for messages.
};

/// What must hold at the end; each check can be switched off.
struct checks_spec {
  int errors_allowed = 0;         ///< Requests that may end with an error (e.g. no decode left).
  bool identical = true;          ///< Complete answers equal the single-process engine's.
  int64_t detect_ms = 0;          ///< Each detectable fault noticed within this (0: unchecked).
  int64_t serve_again_ms = 5000;  ///< A new request served within this after each fault (0: no).
  int64_t exit_ms = 10000;        ///< A process sent SIGTERM exits within this.
  bool kv_leaks = true;           ///< Every KV pool's free blocks back to their start.
  double memory_growth = 0;       ///< Surviving nodes' RSS at most this x their baseline (0: no).
};

struct scenario {
  std::string name;
  std::string about;
  std::string source;  ///< The file, or "random #N (seed S)".
  topology_spec topology;
  workload_spec workload;
  std::vector<fault_spec> faults;
  checks_spec checks;
};

/// Parses a scenario; `source` names it in errors. `base_dir` resolves relative paths.
result<scenario> parse_scenario(const std::string& yaml, const std::string& source,
                                const std::string& base_dir);
result<scenario> load_scenario(const std::string& path);

/// The manifest the runner deploys: the scenario's, with the nodes at `addresses` (one per node,
/// in the manifest's order, or spread roles over that many nodes), the model, the join secret and
/// the API key filled in. Checked like any manifest.
result<config::manifest> complete_manifest(const scenario& s, const std::string& model_dir,
                                           const std::vector<std::string>& addresses,
                                           const std::string& secret_file,
                                           const std::string& api_key, std::string* yaml_out);

/// The node names of the scenario's topology, in order.
std::vector<std::string> node_names(const scenario& s);

/// "kill node n1", "stop node n2 for 3000 ms": a fault as event lines say it.
std::string describe(const fault_spec& f);

}  // namespace brigade::chaos

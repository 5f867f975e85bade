// A cluster manifest: the model, the roles and their counts, batch limits, the HTTP listener,
// API keys and the restart policy. Written in YAML; every field is validated and an error names
// the field and the problem.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::deploy {

/// How the supervisor restarts a failed actor: at most max_restarts within window_s, waiting
/// backoff_ms before the first restart and doubling up to max_backoff_ms.
struct restart_policy {
  int max_restarts = 5;
  double window_s = 60.0;
  int backoff_ms = 50;
  int max_backoff_ms = 5000;
};

struct prefill_role {
  int count = 1;
  int max_step_tokens = 512;  ///< Prompt tokens per prefill step (chunk budget).
  int kv_tokens = 16384;      ///< KV capacity while prompts are being prefilled.
};

struct decode_role {
  int count = 1;
  int max_running = 32;  ///< Sequences in one decode step.
  int kv_tokens = 65536;
};

struct expert_shard_role {
  int count = 4;
  int slots_per_shard = 0;  ///< Physical expert slots per shard; 0: just enough for every expert.
};

/// Expert load balancing: samples, re-plans and the gain a plan must promise to be adopted.
struct eplb_policy {
  bool enabled = true;
  int64_t sample_interval_steps = 1000;
  int64_t replan_interval_steps = 10000;
  double margin = 0.02;
};

/// A machine (a `brigade node` agent) and the role instances it hosts.
struct node_spec {
  std::string name;     ///< Unique, e.g. "gpu-host-1".
  std::string address;  ///< HOST:PORT the agent listens on.
  int prefill = 0;
  int decode = 0;
  int expert_shards = 0;
};

/// The data plane's UCX settings (UCX_TLS, UCX_NET_DEVICES) for every node.
struct transport_settings {
  std::string tls = "tcp";
  std::string net_devices;  ///< Empty lets UCX choose.
};

struct manifest {
  std::string source = "<embedded default>";  ///< Where it came from, for messages.
  std::string model;                          ///< Checkpoint directory.
  std::string listen = "127.0.0.1:8000";
  std::vector<std::string> api_keys;
  int admission_queue = 256;  ///< Requests waiting for a worker; beyond it the API answers 429.
  int block_tokens = 16;      ///< Tokens per KV block.
  prefill_role prefill;
  decode_role decode;
  expert_shard_role experts;
  restart_policy restart;
  eplb_policy eplb;
  /// Empty: everything runs in this process. Otherwise roles run on these nodes and this
  /// process is the coordinator (router, registry, supervisor, HTTP).
  std::vector<node_spec> nodes;
  std::string join_secret_file;  ///< Required with nodes: both sides prove they know it.
  transport_settings transport;
};

/// Parses manifest YAML; `source` names the file in errors.
result<manifest> parse_manifest(const std::string& yaml, const std::string& source);
result<manifest> load_manifest(const std::string& path);
/// The embedded default: one prefill worker, one decode worker, four expert shards, serving
/// `model_dir` on 127.0.0.1:8000.
manifest default_manifest(const std::string& model_dir);

}  // namespace brigade::deploy

// A cluster manifest: the model, the roles and their counts, batch limits, the HTTP listener,
// API and admin keys and the restart policy. Written in YAML; every field is validated and an error
// names the field and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/device_choice.hpp"
#include "gpu/dtype.hpp"
#include "kvcache/retention.hpp"
#include "model/chat_template.hpp"
#include "model/speculation.hpp"
#include "serve/auth.hpp"

namespace brigade::config {

/// How the supervisor restarts a failed actor: at most max_restarts within window_s, waiting
/// backoff_ms before the first restart and doubling up to max_backoff_ms.
struct restart_policy {
  int max_restarts = 5;
  double window_s = 60.0;
  int backoff_ms = 50;
  int max_backoff_ms = 5000;

  /// The wait before the next restart of a role restarted `recent` times in the window:
  /// backoff_ms doubled per restart, at most max_backoff_ms. In 64 bits: backoff_ms << 20
  /// overflows an int from 2048 ms on.
  int delay_ms(size_t recent) const {
    const int shift = static_cast<int>(recent < 20 ? recent : 20);
    const int64_t doubled = static_cast<int64_t>(backoff_ms) << shift;
    const int64_t capped = doubled < max_backoff_ms ? doubled : max_backoff_ms;
    return static_cast<int>(capped < 0 ? 0 : capped);
  }
};

struct prefill_role {
  int count = 1;
  int max_step_tokens = 512;  ///< Prompt tokens per prefill step (chunk budget).
  int kv_tokens = 16384;      ///< KV capacity while prompts are being prefilled.
  gpu::device_choice device;  ///< Where its forward passes run, unless its node says otherwise.
};

struct decode_role {
  int count = 1;
  int max_running = 32;  ///< Sequences in one decode step.
  int kv_tokens = 65536;
  /// Drafts verified in each step, by prompt lookup or a draft model; off by default
  /// (max_draft 0).
  model::speculation_options speculation;
  gpu::device_choice device;  ///< Where its forward passes run, unless its node says otherwise.
};

struct expert_shard_role {
  int count = 4;
  /// Physical expert slots per shard; 0: a quarter more slots than experts, spread evenly
  /// (actors::default_slots_per_shard), so that hot experts get replicas.
  int slots_per_shard = 0;
  gpu::device_choice device;  ///< Where its experts live, unless its node says otherwise.
};

/// Where the replicas of one expert group (the model's n_group, for group-limited routing) may
/// live: anywhere, or all on one node, so that a token's experts sit on at most topk_group nodes.
enum class group_placement { free, node };

/// Expert load balancing: samples, re-plans and the gain a plan must promise to be adopted.
struct eplb_policy {
  bool enabled = true;
  int64_t sample_interval_steps = 1000;
  int64_t replan_interval_steps = 10000;
  double margin = 0.02;
  /// A shard's pause after each expert a migration copies into it from another node (or reads
  /// from the checkpoint): the copies spread over more steps and each step meets less of them.
  /// 0 copies back to back. Steps that overlap a migration between two nodes were 1.11-1.12x
  /// their neighbours in the median back to back, about 1.05x at 50 ms and 1.025x at 100 ms
  /// (bench balance --migration-nodes, alternated runs); a migration of 100 copies per shard
  /// then takes about 10 s, which a re-plan every 10,000 steps leaves room for.
  int copy_interval_ms = 100;
  /// What one plan may copy: this fraction of the layout's slots, counted in copies within a
  /// node, a copy from another node counting cross_node_copy_cost of them (it takes the network).
  double move_budget = 0.25;
  double cross_node_copy_cost = 2.0;
  /// A sample window whose busiest shard counted more than this over the mean brings the next
  /// plan forward, without waiting for replan_interval_steps (drift outran the cadence); 0 (the
  /// default) keeps to the cadence. The excess must also exceed three standard deviations of
  /// counting noise (3 x sqrt of the mean shard's rows): a small window crosses any threshold by
  /// chance, and each crossing would be a re-plan and often a migration. Off by default: a plan
  /// that comes on its own makes an operator's /v1/admin/replan wait (409) while it migrates.
  double early_replan_above = 0;
  /// group_placement: node keeps every replica of an expert group on one of the nodes hosting
  /// expert shards, groups balanced over them; it needs at least two such nodes hosting as many
  /// shards each, and a model whose n_group they divide (checked when the model is read).
  /// free (the default) places each expert anywhere.
  group_placement placement = group_placement::free;
};

/// How the coordinator watches its nodes, and how a node waits for its coordinator. A node whose
/// heartbeats stop is first suspected (no new work goes there), then declared lost (its roles
/// move elsewhere, unless it answers again within rejoin_window_ms). Shorter timeouts notice a
/// dead node sooner but mistake more hiccups for deaths; docs/chaos.md measures both sides.
struct liveness_policy {
  int heartbeat_ms = 200;  ///< How often the coordinator pings each node (and CAF heartbeats).
  double suspect_phi = 8;  ///< Suspicion (phi accrual) at which a silent node is suspected.
  int acceptable_pause_ms = 500;  ///< Silence beyond the usual heartbeat gap that costs nothing.
  int dead_after_ms = 3000;       ///< Silence after which the connection is closed: node lost.
  /// A lost node that answers a re-dial within this keeps its roles (they are adopted back).
  int rejoin_window_ms = 1000;
  int redial_max_backoff_ms = 1000;  ///< Re-dials of a lost node back off up to this.
  /// How long a node keeps the roles of a coordinator it lost contact with, for a quick return.
  int grace_ms = 30000;
  /// Requests waiting while no decode (or prefill) worker runs anywhere fail after this long.
  int no_worker_timeout_ms = 30000;
};

/// A machine (a `brigade node` agent) and the role instances it hosts.
struct node_spec {
  std::string name;     ///< Unique, e.g. "gpu-host-1".
  std::string address;  ///< HOST:PORT the agent listens on.
  int prefill = 0;
  int decode = 0;
  int expert_shards = 0;
  /// `device`: the device of every role on this node, or of each kind (`device: {decode:
  /// cuda:1, expert_shard: cuda:0}`). What a node says wins over the role kind's device: it is
  /// the node that has, or lacks, the hardware. Unset: the role kind's.
  std::optional<gpu::device_choice> device;
  std::optional<gpu::device_choice> prefill_device;
  std::optional<gpu::device_choice> decode_device;
  std::optional<gpu::device_choice> expert_shard_device;
};

/// The data plane's UCX settings (UCX_TLS, UCX_NET_DEVICES) for every node.
struct transport_settings {
  std::string tls = "tcp";
  std::string net_devices;  ///< Empty lets UCX choose.
};

/// The prefix KV cache: the prefill workers' pools, and the node's KV store (host memory and
/// SSD tiers). A budget of 0 turns its tier off; pool_bytes 0 means the whole prefill KV pool.
struct kv_cache_policy {
  bool enabled = true;
  uint64_t pool_bytes = 0;                  ///< Cached blocks a prefill worker keeps in its pool.
  uint64_t host_bytes = uint64_t{1} << 30;  ///< The KV store's host-memory tier.
  uint64_t ssd_bytes = 0;                   ///< The KV store's SSD tier; needs ssd_dir.
  std::string ssd_dir;                      ///< An existing directory for the SSD tier's files.
  /// Retention per scenario; chat (7 days) and agent (3 days) unless the manifest changes them.
  std::vector<kvcache::scenario_retention> scenarios{{"chat", 7 * 86400}, {"agent", 3 * 86400}};

  /// Whether a KV store actor runs: the cache is on and has a host or SSD tier.
  bool has_store() const { return enabled && (host_bytes > 0 || ssd_bytes > 0); }
};

struct manifest {
  std::string source = "<embedded default>";  ///< Where it came from, for messages.
  std::string model;                          ///< Checkpoint directory.
  /// chat_format: the format to render the model's conversations in, whatever its chat template
  /// says; unset, brigade recognises the template or refuses it (model::load_chat_style).
  std::optional<model::chat_format> chat_format;
  std::string listen = "127.0.0.1:8000";
  /// serve.api_keys: each a string, or {key, cache_salt} binding the key's requests to a
  /// prefix-cache namespace (serve/auth.hpp). Empty: the ordinary routes are open.
  std::vector<serve::api_key> api_keys;
  /// serve.admin_keys: with any, only they open /v1/admin/* (serve/admin_access.hpp).
  std::vector<std::string> admin_keys;
  /// serve.admin_without_key: without any key, open /v1/admin/* off loopback too.
  bool admin_without_key = false;
  std::string
      served_model_name;      ///< What clients send as "model"; empty: the model directory's name.
  int admission_queue = 256;  ///< Requests waiting for a worker; beyond it the API answers 429.
  int block_tokens = 16;      ///< Tokens per KV block.
  /// kv_dtype: the element type of every role's KV cache, f32 (exact, the default) or bf16 (half
  /// the KV memory). One for the whole deployment, so that every topology gives one answer.
  gpu::dtype kv_dtype = gpu::dtype::f32;
  prefill_role prefill;
  decode_role decode;
  expert_shard_role experts;
  restart_policy restart;
  liveness_policy liveness;
  eplb_policy eplb;
  /// Empty: everything runs in this process. Otherwise roles run on these nodes and this
  /// process is the coordinator (router, registry, supervisor, HTTP).
  std::vector<node_spec> nodes;
  std::string join_secret_file;  ///< Required with nodes: both sides prove they know it.
  transport_settings transport;
  kv_cache_policy kv_cache;
};

/// Parses manifest YAML; `source` names the file in errors.
result<manifest> parse_manifest(const std::string& yaml, const std::string& source);
/// No key twice, and no key both an API key and an admin key (which would its requests be?).
/// parse_manifest checks it; `brigade serve` again once --api-key and --admin-key are applied.
status check_keys(const manifest& m);
result<manifest> load_manifest(const std::string& path);
/// The embedded default: one prefill worker, one decode worker, four expert shards, serving
/// `model_dir` on 127.0.0.1:8000.
manifest default_manifest(const std::string& model_dir);

}  // namespace brigade::config

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
};

/// Parses manifest YAML; `source` names the file in errors.
result<manifest> parse_manifest(const std::string& yaml, const std::string& source);
result<manifest> load_manifest(const std::string& path);
/// The embedded default: one prefill worker, one decode worker, four expert shards, serving
/// `model_dir` on 127.0.0.1:8000.
manifest default_manifest(const std::string& model_dir);

}  // namespace brigade::deploy

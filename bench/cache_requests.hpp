// Requests through a topology for the cache benchmarks: closed-loop clients that time each
// request's first token, the prefill workers' own account of their steps, and waiting for the KV
// store to settle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::deploy {
class topology;
}

namespace brigade::bench {

/// Token ids from a seeded mix: `stream` names the sequence, so equal streams give equal tokens
/// (ids from 3 to vocab - 1).
std::vector<int32_t> tokens_of(uint64_t stream, int count, int vocab);

/// The prefill workers' own account: steps, tokens computed, and time spent in steps.
struct worker_account {
  int64_t steps = 0;
  int64_t computed_tokens = 0;
  double busy_s = 0;
};

worker_account prefill_account(const deploy::topology& topo);

struct run_result {
  worker_account worker;  // during the run
  double wall_s = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  std::vector<double> ttft_ms;
  std::string failure;
};

/// Runs `prompts` through `concurrency` closed-loop clients: each submits its next prompt as soon
/// as its previous one finished, so the worker always has the same number of prompts to batch
/// (no waves that drain and refill). One output token each, in the "agent" scenario.
run_result run_requests(deploy::topology& topo, const std::vector<std::vector<int32_t>>& prompts,
                        int concurrency);

/// Waits until the KV store has received what the prefill workers sent and written it all
/// (demotions run in the background).
void wait_store_idle(const deploy::topology& topo);

}  // namespace brigade::bench

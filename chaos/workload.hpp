// The requests of a chaos run, made from the scenario's workload and its seed: generated
// prompts, prompts from a file, or a Mooncake trace scaled down to the model at hand.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chaos/scenario.hpp"
#include "common/result.hpp"

namespace brigade::chaos {

/// One request as the driver sends it and the oracle answers it.
struct request_spec {
  int index = 0;
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  double temperature = 0;  ///< 0: greedy.
  double top_p = 1.0;
  uint64_t seed = 0;  ///< Seeded sampling's seed.
  bool stream = true;
  std::string scenario = "chat";
  int64_t arrival_ms = -1;  ///< Open loop: when to send it after the start; -1: closed loop.
};

/// Turns text into token ids (the model's tokenizer), for prompt files that hold text.
using encoder = std::function<std::vector<int32_t>(const std::string&)>;

/// The requests of `w` for a model of `vocab` tokens and `max_positions` context, drawn from
/// `seed`. Prompt and output together always fit the context.
result<std::vector<request_spec>> make_requests(const workload_spec& w, int vocab,
                                                int max_positions, uint64_t seed,
                                                const encoder& encode);

/// A short greedy request for probing whether the cluster serves (not part of the workload).
request_spec probe_request(int index, int vocab);

}  // namespace brigade::chaos

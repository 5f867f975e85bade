// The trained pair as `brigade serve` runs it: single-user requests through the actor topology
// of the embedded default manifest (router, a prefill and a decode worker, expert shards), once
// plainly and once with the pair's draft model and its confidence head (`--draft-model`), the
// measured gate on as served. The two topologies run side by side and take each prompt in
// turn, in alternating order, so that drift on the shared cores falls on both.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::bench {

struct served_options {
  std::string target_dir;  ///< The pair's target checkpoint.
  std::string draft_dir;   ///< Its draft (with confidence_head.json beside it, when fitted).
  std::vector<std::vector<int32_t>> prompts;  ///< One request each per round.
  int max_tokens = 64;
  int rounds = 1;
};

/// Runs the requests; fills out["served"] (per mode: tokens/s after the first token, end to end,
/// time to first token; the draft's acceptance; whether every answer was plain decoding's) and
/// returns the table.
result<std::string> run_served_rows(const served_options& options, nlohmann::json& out);

}  // namespace brigade::bench

// What naming a KV block costs: brigade's keyed SipHash-2-4-128 chain beside the unkeyed XXH3-64
// chain it replaced, measured side by side (`brigade bench cache`, `brigade replay`).
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace brigade::bench {

struct block_hash_timing {
  int block_tokens = 0;
  double keyed_ns_per_block = 0;   ///< Median over alternating rounds.
  double legacy_ns_per_block = 0;  ///< The same blocks, the same rounds.
};

/// Hashes chains of random blocks of `block_tokens` tokens under both schemes, alternating
/// rounds so that both see the same machine.
block_hash_timing time_block_hashes(int block_tokens);

nlohmann::json to_json(const block_hash_timing& t);

}  // namespace brigade::bench

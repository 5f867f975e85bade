// Scenarios drawn from a seed, in the spirit of FoundationDB's simulation and TigerBeetle's VOPR:
// roles spread over 2 to 4 nodes, expert shards with and without replica slots, and a mix of
// every fault kind, each run short. The same seed draws the same scenario.
#pragma once

#include <cstdint>

#include "chaos/scenario.hpp"

namespace brigade::chaos {

/// Scenario number `index` of the random runs seeded with `seed`.
scenario random_scenario(uint64_t seed, int index);

}  // namespace brigade::chaos

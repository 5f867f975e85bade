// The retention table of a deployment: scenario ids are indexes into the manifest's list (chat
// and agent first), so that every actor built from one manifest numbers scenarios alike.
#pragma once

#include <vector>

#include "kvcache/retention.hpp"

namespace brigade::actors {

/// The table of `scenarios` (validated by the manifest parser; an invalid entry is skipped).
kvcache::retention retention_table(const std::vector<kvcache::scenario_retention>& scenarios);

}  // namespace brigade::actors

// The identifiers the data plane speaks in. The control plane assigns both.
#pragma once

#include <cstdint>

namespace brigade::transport {

/// A node of the cluster, as the control plane numbers it; every frame carries its sender's id.
using peer_id = std::uint64_t;

/// A logical stream of messages between nodes; each channel has its own receive handler.
using channel_id = std::uint16_t;

}  // namespace brigade::transport

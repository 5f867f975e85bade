// Fault injection in a node's own process, as its coordinator asks for it (node_fault): rules of
// the data plane's fault points and of the SSD tier's disk.
#pragma once

#include <string>

#include "cluster/node_agent_protocol.hpp"
#include "common/result.hpp"

namespace brigade::cluster {

/// Sets, replaces or clears a fault here. A spec that starts with "disk " is a disk rule
/// (kvcache::disk_faults: "disk full", "disk slow ms=50"); any other is a data-plane rule
/// (transport::fault_points: "drop rate=0.05 to=ID"). An empty spec clears the fault `name`,
/// or every fault when the name is empty too. for_ms bounds how long the fault lasts.
status apply_fault(const std::string& node_name, const cluster::node_fault& fault);

}  // namespace brigade::cluster

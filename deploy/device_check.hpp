// Whether the devices a manifest's roles in this process ask for are here and large enough, checked
// before any weights are loaded: `brigade serve` and `brigade deploy --dry-run` refuse a manifest
// whose device is absent or too small, naming the role, its node and what was found. Roles on nodes
// are checked by their node as it spawns them (actors::spawn_role).
#pragma once

#include <cstddef>

#include "common/result.hpp"
#include "gpu/device_probe.hpp"

namespace brigade::config {
struct manifest;
}
namespace brigade::model {
struct model_config;
}
namespace brigade::eplb {
class layout;
}

namespace brigade::deploy {

/// For a manifest without nodes (every role in this process): each role's device must be one
/// `report` lists, and on each device the weights the roles there share (`element_bytes` per
/// weight) and every role's own (KV storage for workers, expert slots of `layout` for shards)
/// must fit its memory. Pure given `report`: tests pass a device of their own. OK with nodes.
status check_local_devices(const config::manifest& m, const model::model_config& model,
                           const eplb::layout& layout, size_t element_bytes,
                           const gpu::device_report& report);

/// check_local_devices against this machine: the CUDA devices probe_cuda() finds (probed only
/// when a role asks for one) and the element size of the checkpoint's weights.
status check_local_devices_here(const config::manifest& m, const model::model_config& model,
                                const eplb::layout& layout);

/// Whether any role of `m` asks for a CUDA device, on any node.
bool uses_cuda(const config::manifest& m);

}  // namespace brigade::deploy

// Which node runs each role instance of a manifest, and the dry-run report of it.
#pragma once

#include <string>
#include <vector>

#include "actors/role_kind.hpp"
#include "config/manifest.hpp"

namespace brigade::config {

using actors::role_kind;

/// One role instance and where it runs.
struct placed_role {
  role_kind role = role_kind::expert_shard;  ///< prefill, decode or expert_shard
  int index = 0;                             ///< Index within the role, stable across restarts.
  std::string name;                          ///< "decode-0"
  std::string node;           ///< Node name, or "local" when the manifest names no nodes.
  gpu::device_choice device;  ///< Where it computes (device_for).
};

/// The device of a `role` instance on `node` ("local" without nodes): the node's device for
/// that kind, else the node's device, else the role kind's (roles.<kind>.device), else cpu. The
/// node's word wins because the node is what has, or lacks, the hardware.
gpu::device_choice device_for(const manifest& m, role_kind role, const std::string& node);

/// Instances numbered in node order: the first node's shards are expert_shard-0, -1, ...
std::vector<placed_role> place(const manifest& m);

/// The placement node by node, as `brigade deploy --dry-run` prints it; a role on a device other
/// than the CPU shows it ("decode-0@cuda:0").
std::string describe_placement(const manifest& m);

}  // namespace brigade::config

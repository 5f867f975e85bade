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
  std::string node;  ///< Node name, or "local" when the manifest names no nodes.
};

/// Instances numbered in node order: the first node's shards are expert_shard-0, -1, ...
std::vector<placed_role> place(const manifest& m);

/// The placement node by node, as `brigade deploy --dry-run` prints it.
std::string describe_placement(const manifest& m);

}  // namespace brigade::config

// The kinds of role a supervisor runs and a node agent spawns. Plain values: configuration and
// the composition layer name roles by kind, never by string comparisons.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace brigade::actors {

/// A supervised role. The values are the wire form (held_role, role_spec's alternatives).
enum class role_kind : int32_t { expert_shard = 0, kv_store = 1, prefill = 2, decode = 3 };

inline constexpr role_kind all_role_kinds[] = {role_kind::expert_shard, role_kind::kv_store,
                                               role_kind::prefill, role_kind::decode};

/// "expert_shard", "kv_store", "prefill" or "decode": the names the registry, the manifest's
/// roles section and /v1/actors use.
constexpr const char* to_string(role_kind k) {
  switch (k) {
    case role_kind::expert_shard:
      return "expert_shard";
    case role_kind::kv_store:
      return "kv_store";
    case role_kind::prefill:
      return "prefill";
    case role_kind::decode:
      return "decode";
  }
  return "unknown";
}

inline std::optional<role_kind> parse_role_kind(std::string_view name) {
  for (role_kind k : all_role_kinds) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

/// Prefill and decode workers: they route rows to the expert shards and get shard sets.
constexpr bool is_worker(role_kind k) {
  return k == role_kind::prefill || k == role_kind::decode;
}

}  // namespace brigade::actors

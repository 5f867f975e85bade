#include "config/role_placement.hpp"

#include <map>

namespace brigade::config {

gpu::device_choice device_for(const manifest& m, role_kind role, const std::string& node) {
  if (role == role_kind::kv_store) return {};  // It holds opaque blocks in host memory.
  const node_spec* spec = nullptr;
  for (const auto& n : m.nodes) {
    if (n.name == node) spec = &n;
  }
  if (spec) {
    const std::optional<gpu::device_choice>& own = role == role_kind::prefill ? spec->prefill_device
                                                   : role == role_kind::decode
                                                       ? spec->decode_device
                                                       : spec->expert_shard_device;
    if (own) return *own;
    if (spec->device) return *spec->device;
  }
  switch (role) {
    case role_kind::prefill:
      return m.prefill.device;
    case role_kind::decode:
      return m.decode.device;
    case role_kind::expert_shard:
      return m.experts.device;
    default:
      return {};
  }
}

std::vector<placed_role> place(const manifest& m) {
  std::vector<placed_role> out;
  std::map<role_kind, int> next;
  auto add = [&](role_kind role, int count, const std::string& node) {
    for (int i = 0; i < count; ++i) {
      const int index = next[role]++;
      out.push_back({role, index, std::string(to_string(role)) + "-" + std::to_string(index), node,
                     device_for(m, role, node)});
    }
  };
  if (m.nodes.empty()) {
    add(role_kind::expert_shard, m.experts.count, "local");
    add(role_kind::decode, m.decode.count, "local");
    add(role_kind::prefill, m.prefill.count, "local");
    return out;
  }
  for (const auto& n : m.nodes)
    add(role_kind::expert_shard, n.expert_shards, n.name);
  for (const auto& n : m.nodes)
    add(role_kind::decode, n.decode, n.name);
  for (const auto& n : m.nodes)
    add(role_kind::prefill, n.prefill, n.name);
  return out;
}

std::string describe_placement(const manifest& m) {
  const auto placed = place(m);
  std::string out = "manifest " + m.source + ": model " + m.model + "\n";
  out += "coordinator (this process): router, registry, supervisor, HTTP on " + m.listen + "\n";
  std::vector<std::pair<std::string, std::string>> nodes;
  if (m.nodes.empty()) {
    nodes.emplace_back("local", "in this process");
  } else {
    for (const auto& n : m.nodes)
      nodes.emplace_back(n.name, n.address);
  }
  for (const auto& [name, address] : nodes) {
    out += "node " + name + " (" + address + "):";
    bool any = false;
    for (const auto& p : placed) {
      if (p.node != name) continue;
      out += " " + p.name + (p.device.cuda ? "@" + p.device.to_string() : "");
      any = true;
    }
    out += any ? "\n" : " (no roles)\n";
  }
  out += "totals: " + std::to_string(m.prefill.count) + " prefill, " +
         std::to_string(m.decode.count) + " decode, " + std::to_string(m.experts.count) +
         " expert shards";
  if (!m.nodes.empty()) {
    out += "; data plane UCX_TLS=" + m.transport.tls +
           (m.transport.net_devices.empty() ? "" : " UCX_NET_DEVICES=" + m.transport.net_devices);
  }
  return out + "\n";
}

}  // namespace brigade::config

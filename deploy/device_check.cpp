#include "deploy/device_check.hpp"

#include <map>
#include <vector>

#include "actors/spawn_checks.hpp"
#include "config/manifest.hpp"
#include "config/role_placement.hpp"
#include "eplb/layout.hpp"
#include "model/config.hpp"

namespace brigade::deploy {
namespace {

// What one role keeps on its device beyond the shared weights.
gpu::device_need own_need(const config::manifest& m, const model::model_config& model,
                          const eplb::layout& layout, size_t element_bytes,
                          const config::placed_role& p) {
  const std::string who = p.name + " (" + to_string(p.role) + " on node " + p.node + ")";
  switch (p.role) {
    case actors::role_kind::decode:
      return {who + " KV for " + std::to_string(m.decode.kv_tokens) + " tokens",
              actors::kv_storage_bytes(model, m.decode.kv_tokens, m.block_tokens, m.kv_dtype)};
    case actors::role_kind::prefill:
      return {who + " KV for " + std::to_string(m.prefill.kv_tokens) + " tokens",
              actors::kv_storage_bytes(model, m.prefill.kv_tokens, m.block_tokens, m.kv_dtype)};
    case actors::role_kind::expert_shard: {
      const uint64_t slots = static_cast<uint64_t>(layout.slots_per_shard()) *
                             static_cast<uint64_t>(model.moe_layers().size());
      return {who + " " + std::to_string(slots) + " expert slots",
              slots * actors::expert_weight_bytes(model, element_bytes)};
    }
    case actors::role_kind::kv_store:
      break;
  }
  return {who, 0};
}

}  // namespace

status check_local_devices(const config::manifest& m, const model::model_config& model,
                           const eplb::layout& layout, size_t element_bytes,
                           const gpu::device_report& report) {
  if (!m.nodes.empty()) return ok_status();
  std::map<gpu::device_choice, std::vector<gpu::device_need>> by_device;
  for (const config::placed_role& p : config::place(m)) {
    if (!p.device.cuda) continue;
    const std::string who = p.name + " (" + to_string(p.role) + " on node " + p.node + ")";
    if (status present = gpu::check_device_present(p.device, report, who); !present) {
      return error(present.err().code, m.source + ": " + present.err().message);
    }
    auto& needs = by_device[p.device];
    if (needs.empty()) {
      needs.push_back(
          {"the weights the roles on it share", actors::dense_weight_bytes(model, element_bytes)});
    }
    needs.push_back(own_need(m, model, layout, element_bytes, p));
  }
  for (const auto& [device, needs] : by_device) {
    for (const gpu::device_info& info : report.devices) {
      if (info.index != device.ordinal) continue;
      status fits = gpu::check_device_memory(needs, info.memory_bytes, device, info.name);
      if (!fits) return error(fits.err().code, m.source + ": " + fits.err().message);
    }
  }
  return ok_status();
}

status check_local_devices_here(const config::manifest& m, const model::model_config& model,
                                const eplb::layout& layout) {
  if (!m.nodes.empty() || !uses_cuda(m)) return ok_status();
  return check_local_devices(m, model, layout, actors::checkpoint_element_bytes(m.model),
                             gpu::probe_cuda());
}

bool uses_cuda(const config::manifest& m) {
  for (const config::placed_role& p : config::place(m)) {
    if (p.device.cuda) return true;
  }
  return false;
}

}  // namespace brigade::deploy

#include "cluster/fault_injection.hpp"

#include "common/log.hpp"
#include "kvcache/disk_faults.hpp"
#include "transport/fault_points.hpp"

namespace brigade::cluster {

status apply_fault(const std::string& node_name, const cluster::node_fault& fault) {
  const std::string who = "node " + node_name;
  if (fault.for_ms < 0 || fault.for_ms > 24LL * 3600 * 1000) {
    return error(errc::invalid_argument, "a fault lasts between 0 (until cleared) and 24 h");
  }
  if (fault.spec.empty()) {
    if (fault.name.empty()) {
      transport::fault_points::clear_all();
      kvcache::disk_faults::clear_all();
      log::info(who, "fault injection: every fault cleared");
    } else {
      transport::fault_points::clear(fault.name);
      kvcache::disk_faults::clear(fault.name);
      log::info(who, "fault injection: '" + fault.name + "' cleared");
    }
    return ok_status();
  }
  if (fault.name.empty()) return error(errc::invalid_argument, "a fault needs a name");
  const std::string lasting =
      fault.for_ms > 0 ? " for " + std::to_string(fault.for_ms) + " ms" : " until cleared";
  const std::string disk = "disk ";
  if (fault.spec.compare(0, disk.size(), disk) == 0) {
    std::string spec = fault.spec.substr(disk.size());
    if (fault.for_ms > 0) spec += " for_ms=" + std::to_string(fault.for_ms);
    status set = kvcache::disk_faults::set(fault.name, spec);
    if (!set) return set;
  } else {
    auto rule = transport::fault_points::parse(fault.spec);
    if (!rule) return rule.err();
    rule->for_ms = static_cast<uint32_t>(fault.for_ms);
    transport::fault_points::set(fault.name, rule.value());
  }
  log::warn(who, "fault injection: '" + fault.name + "' = " + fault.spec + lasting);
  return ok_status();
}

}  // namespace brigade::cluster

#include "chaos/random_scenario.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

namespace brigade::chaos {
namespace {

using rng_t = std::mt19937_64;

int between(rng_t& rng, int low, int high) {
  return std::uniform_int_distribution<int>(low, high)(rng);
}

// Roles over `nodes` nodes: at least one prefill worker, one decode worker and one shard in all,
// each node holding something.
std::string manifest_yaml(rng_t& rng, int nodes, int experts, bool ssd) {
  const int prefill = between(rng, 1, 2), decode = between(rng, 1, 3);
  const int shards = between(rng, 2, std::min(6, experts));
  const int slots = (experts + shards - 1) / shards + between(rng, 0, 1);  // 1: replicas
  std::vector<std::map<std::string, int>> per(static_cast<size_t>(nodes));
  auto place = [&](const char* role, int n) {
    for (int i = 0; i < n; ++i)
      ++per[static_cast<size_t>(between(rng, 0, nodes - 1))][role];
  };
  // Every node first gets a shard or a worker, then the rest goes anywhere.
  for (int n = 0; n < nodes && n < shards; ++n)
    ++per[static_cast<size_t>(n)]["expert_shard"];
  place("expert_shard", std::max(0, shards - nodes));
  place("decode", decode);
  place("prefill", prefill);
  std::ostringstream y;
  y << "roles: {expert_shard: {slots_per_shard: " << slots << "}}\n"
    << "restart: {max_restarts: 20, window_s: 60, backoff_ms: 20}\n"
    << (ssd ? "kv_cache: {pool_bytes: 1, host_bytes: 1MiB, ssd_bytes: 32MiB, ssd_dir: ssd}\n"
            : "kv_cache: {pool_bytes: 1, host_bytes: 16MiB}\n")
    << "eplb: {copy_interval_ms: 100, sample_interval_steps: 8}\n"
    << "nodes:\n";
  for (int n = 0; n < nodes; ++n) {
    y << "  - {name: n" << n + 1 << ", roles: {";
    bool first = true;
    for (const auto& [role, k] : per[static_cast<size_t>(n)]) {
      y << (first ? "" : ", ") << role << ": " << k;
      first = false;
    }
    y << "}}\n";
  }
  return y.str();
}

fault_spec random_fault(rng_t& rng, int nodes, int64_t at_ms, bool ssd) {
  fault_spec f;
  f.time.when = fault_time::kind::at;
  f.time.ms = at_ms;
  const std::string node = "n" + std::to_string(between(rng, 1, nodes));
  static const char* roles[] = {"prefill", "decode", "expert_shard", "kv_store"};
  switch (between(rng, 0, ssd ? 9 : 8)) {
    case 0:
      f.action = fault_spec::kind::kill;
      f.target = {fault_target::kind::node, node};
      break;
    case 1:
      f.action = fault_spec::kind::kill;
      f.target = {fault_target::kind::role, roles[between(rng, 0, 3)]};
      break;
    case 2:
      f.action = fault_spec::kind::stop;
      f.target = {fault_target::kind::node, node};
      f.for_ms = between(rng, 1, 4) * 1000;
      break;
    case 3:
      f.action = fault_spec::kind::partition;
      f.target = {fault_target::kind::node, node};
      f.plane = between(rng, 0, 1) == 0 ? "control" : "both";
      f.for_ms = between(rng, 2, 5) * 1000;
      break;
    case 4:
      f.action = fault_spec::kind::network;
      f.target = {fault_target::kind::node, node};
      f.from = "all";
      f.drop = between(rng, 0, 1) * 0.05;
      f.duplicate = between(rng, 0, 1) * 0.05;
      f.reorder = between(rng, 0, 1) * 0.1;
      f.delay_ms = f.reorder > 0 ? 10 : 0;
      if (f.drop == 0 && f.duplicate == 0 && f.reorder == 0) f.duplicate = 0.05;
      f.for_ms = 2000;
      break;
    case 5:
      f.action = fault_spec::kind::stop;
      f.target = {fault_target::kind::coordinator, ""};
      f.for_ms = between(rng, 1, 4) * 1000;
      break;
    case 6:
      f.action = fault_spec::kind::kill;
      f.target = {fault_target::kind::role, "expert_shard"};
      f.time.when = fault_time::kind::migration;
      break;
    case 7:
      f.action = fault_spec::kind::term;
      f.target = {fault_target::kind::node, node};
      break;
    case 9:
      f.action = fault_spec::kind::disk;
      f.target = {fault_target::kind::node, node};
      if (between(rng, 0, 2) == 0) {
        f.disk_corrupt_blocks = between(rng, 1, 8);
      } else if (between(rng, 0, 1) == 0) {
        f.disk_full = true;
        f.for_ms = 1500;
      } else {
        f.disk_slow_ms = between(rng, 5, 40);
        f.for_ms = 1500;
      }
      break;
    default:
      f.action = fault_spec::kind::kill;
      f.target = {fault_target::kind::node, node};
      break;
  }
  f.text = describe(f);
  return f;
}

}  // namespace

scenario random_scenario(uint64_t seed, int index) {
  rng_t rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(index) * 7919 + 1);
  scenario s;
  s.name = "random-" + std::to_string(index);
  s.source = "random #" + std::to_string(index) + " (seed " + std::to_string(seed) + ")";
  const int nodes = between(rng, 2, 4);
  s.topology.nodes = nodes;
  s.topology.make.family = "qwen3_moe";
  s.topology.make.layers = 2;
  s.topology.make.hidden = 64;
  s.topology.make.heads = 4;
  s.topology.make.kv_heads = 2;
  s.topology.make.head_dim = 16;
  s.topology.make.experts = 12;
  s.topology.make.top_k = 2;
  s.topology.make.moe_inter = 32;
  s.topology.make.vocab = 2048;
  s.topology.make.max_positions = 2048;
  s.topology.make.dtype = "float32";
  s.topology.make.seed = 5;
  const bool ssd = between(rng, 0, 2) == 0;
  s.topology.manifest_yaml = manifest_yaml(rng, nodes, s.topology.make.experts, ssd);
  s.workload.requests = between(rng, 12, 24);
  s.workload.concurrency = between(rng, 4, 12);
  s.workload.max_tokens = between(rng, 24, 64);
  s.workload.draw = workload_spec::sampling::mixed;
  s.workload.stream = workload_spec::streaming::mixed;
  s.workload.shared_prefix_tokens = ssd ? 64 : between(rng, 0, 1) * 32;
  const int count = between(rng, 1, 3);
  int64_t at = between(rng, 2, 6) * 100;
  bool killed_node = false;
  std::string down;  // a node killed and not restarted: nothing more strikes it
  // When each node's timed fault (a stop, a partition, a lossy link, a slow disk) heals. A fault
  // on a node still struck waits for that: two stops overlapping make the first one's SIGCONT
  // end the second, and its detection could not be measured.
  std::map<std::string, int64_t> healed_at;
  for (int i = 0; i < count; ++i) {
    fault_spec f = random_fault(rng, nodes, at, ssd);
    int64_t after = 0;
    for (const auto& [node, when] : healed_at) {
      const bool same = f.target.what == fault_target::kind::node && f.target.name == node;
      // The coordinator's faults wait for every node to heal: it measures their detection.
      if (same || f.target.what == fault_target::kind::coordinator) after = std::max(after, when);
    }
    if (after > 0 && f.time.when == fault_time::kind::at && f.time.ms < after + 1500) {
      f.time.ms = after + 1500;
      at = f.time.ms;
    }
    if (!down.empty() && f.target.what == fault_target::kind::node && f.target.name == down) {
      continue;
    }
    // After a node is lost its shards may all share one node, where a migration moves nothing
    // over the network and ends before anyone can strike during it.
    if (f.time.when == fault_time::kind::migration && killed_node) continue;
    // One node down at a time, and back under its name half the time (always after a SIGTERM):
    // the cluster must keep somewhere to run every role.
    const bool takes_node =
        f.target.what == fault_target::kind::node &&
        (f.action == fault_spec::kind::kill || f.action == fault_spec::kind::term);
    if (takes_node) {
      if (killed_node) continue;
      killed_node = true;
      s.faults.push_back(f);
      down = f.target.name;
      if (f.action == fault_spec::kind::term || between(rng, 0, 1) == 1) {
        down.clear();
        fault_spec back;
        back.action = fault_spec::kind::restart;
        back.target = f.target;
        back.time.when = fault_time::kind::after;
        back.time.ms = between(rng, 5, 20) * 100;
        back.text = describe(back);
        s.faults.push_back(back);
      }
    } else {
      s.faults.push_back(f);
    }
    if (f.target.what == fault_target::kind::node && f.for_ms > 0) {
      healed_at[f.target.name] = f.time.ms + f.for_ms;
    }
    at += between(rng, 5, 20) * 100;
    // Nothing else happens while the coordinator is stopped: faults go through it.
    // Nothing else happens while the coordinator is stopped (faults go through it), nor while it
    // finds out what changed meanwhile.
    if (f.target.what == fault_target::kind::coordinator) {
      at = std::max(at, f.time.ms + f.for_ms + 1500);
    }
  }
  s.checks.errors_allowed = 0;
  s.checks.detect_ms = 2500;
  // Faults overlap here (a node cut off while the coordinator stops): the 5 s a single fault
  // gets is checked by the library's scenarios.
  s.checks.serve_again_ms = 8000;
  return s;
}

}  // namespace brigade::chaos

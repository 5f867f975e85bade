#include "deploy/role_configs.hpp"

namespace brigade::deploy {

actors::router_config router_config_for(const config::manifest& m) {
  actors::router_config rc;
  rc.admission_queue = m.admission_queue;
  rc.prefill_workers = m.prefill.count;
  rc.block_tokens = m.block_tokens;
  rc.no_worker_timeout = std::chrono::milliseconds(m.liveness.no_worker_timeout_ms);
  rc.scenarios.clear();
  for (const auto& s : m.kv_cache.scenarios)
    rc.scenarios.push_back(s.name);
  return rc;
}

}  // namespace brigade::deploy

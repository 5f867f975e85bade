// The topology in Prometheus terms, read from the roles' typed statuses at each /metrics scrape.
// Labels are a scenario name and a tier name, never more: the figures are totals and rates, not
// matrices.
//
//   brigade_prefix_cache_prompt_tokens_total{scenario}      prompt tokens prefilled
//   brigade_prefix_cache_hit_tokens_total{scenario,tier}     of which served by pool|host|ssd
//   brigade_prefix_cache_hit_rate{tier}                      hit tokens of the tier / prompt tokens
//   brigade_prefix_cache_scenario_hit_rate{scenario}         all tiers' hits / prompt tokens
//   brigade_kv_store_blocks{tier}, brigade_kv_store_bytes{tier},
//   brigade_kv_store_budget_bytes{tier} brigade_kv_store_corrupt_blocks_total,
//   brigade_kv_store_disk_full_pauses_total, brigade_kv_store_demotions_total,
//   brigade_kv_store_promotions_total
//   brigade_num_requests_running, brigade_num_requests_waiting
//   brigade_expert_balancedness, brigade_eplb_rebalances_total{outcome},
//   brigade_eplb_migration_in_progress, brigade_eplb_migration_duration_seconds
//   speculation figures (serve/speculation_metrics.hpp), summed over the decode workers
#pragma once

#include <cstddef>

#include "actors/router.hpp"
#include "common/metrics.hpp"
#include "deploy/supervisor.hpp"

namespace brigade::deploy {

/// Requests running and waiting, and what the prefix cache served per tier and scenario.
void collect_router_metrics(const router_status& router, metrics::registry& into);
/// The KV stores' tiers and the decode workers' speculation.
void collect_role_metrics(const role_statuses& roles, metrics::registry& into);

/// Expert balance; migration durations are observed once each (the histogram keeps them).
class balance_metrics {
 public:
  void collect(const supervisor_status& s, metrics::registry& into);

 private:
  size_t observed_durations_ = 0;
};

}  // namespace brigade::deploy

// The prefix cache in Prometheus terms, read from role statuses at each /metrics scrape. Labels
// are a scenario name and a tier name, never more: the figures are totals and rates, not
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
#pragma once

#include <vector>

#include "actors/payloads.hpp"
#include "common/metrics.hpp"

namespace brigade::actors {

/// Hit tokens and rates per tier and per scenario, from the router's status.
void collect_cache_metrics(const role_status& router, metrics::registry& into);
/// The KV store's tiers, from the statuses of every role (the kv_store ones are used).
void collect_store_metrics(const std::vector<role_status>& statuses, metrics::registry& into);

}  // namespace brigade::actors

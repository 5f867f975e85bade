#include "deploy/service_metrics.hpp"

#include <array>
#include <string>

#include "serve/speculation_metrics.hpp"

namespace brigade::deploy {
namespace {

// Counters only grow: set one to a total the roles keep.
void set_total(metrics::counter& c, double total) {
  if (total > c.value()) c.inc(total - c.value());
}

void collect_cache_metrics(const router_status& router, metrics::registry& into) {
  const auto& tiers = cache_usage::tiers;
  auto& prompt = into.add_counter("brigade_prefix_cache_prompt_tokens_total",
                                  "Prompt tokens admitted for prefill, by scenario.", {"scenario"});
  auto& hits = into.add_counter("brigade_prefix_cache_hit_tokens_total",
                                "Prompt tokens served by the prefix cache, by scenario and tier.",
                                {"scenario", "tier"});
  auto& tier_rate = into.add_gauge("brigade_prefix_cache_hit_rate",
                                   "Prompt tokens a tier served over all prompt tokens.", {"tier"});
  auto& scenario_rate = into.add_gauge(
      "brigade_prefix_cache_scenario_hit_rate",
      "Prompt tokens the cache served over the scenario's prompt tokens.", {"scenario"});
  double all_prompt = 0;
  std::array<double, 3> all_hits{};
  for (const auto& u : router.cache_served) {
    const auto p = static_cast<double>(u.prompt_tokens);
    set_total(prompt.with({u.scenario}), p);
    double served = 0;
    for (size_t t = 0; t < tiers.size(); ++t) {
      const auto h = static_cast<double>(u.hit_tokens[t]);
      set_total(hits.with({u.scenario, tiers[t]}), h);
      served += h;
      all_hits[t] += h;
    }
    all_prompt += p;
    scenario_rate.with({u.scenario}).set(p > 0 ? served / p : 0.0);
  }
  for (size_t t = 0; t < tiers.size(); ++t) {
    tier_rate.with({tiers[t]}).set(all_prompt > 0 ? all_hits[t] / all_prompt : 0.0);
  }
}

void collect_store_metrics(const kv_store_status& s, metrics::registry& into) {
  if (!s.open) return;
  auto& blocks =
      into.add_gauge("brigade_kv_store_blocks", "Blocks held by a KV store tier.", {"tier"});
  auto& bytes =
      into.add_gauge("brigade_kv_store_bytes", "Bytes held by a KV store tier.", {"tier"});
  auto& budget = into.add_gauge("brigade_kv_store_budget_bytes",
                                "The byte budget of a KV store tier.", {"tier"});
  if (s.block_tokens > 0) {
    into.add_gauge("brigade_kv_store_bytes_per_token",
                   "Bytes one cached token takes in a KV store tier (all layers).")
        .get()
        .set(static_cast<double>(s.block_bytes) / static_cast<double>(s.block_tokens));
  }
  for (const auto& [tier, t] :
       {std::pair<const char*, const kvcache::tier_stats&>{"host", s.store.host},
        {"ssd", s.store.ssd}}) {
    blocks.with({tier}).set(static_cast<double>(t.blocks));
    bytes.with({tier}).set(static_cast<double>(t.bytes));
    budget.with({tier}).set(static_cast<double>(t.budget_bytes));
  }
  set_total(into.add_counter("brigade_kv_store_corrupt_blocks_total",
                             "SSD blocks that failed their checksum: dropped, recomputed.")
                .get(),
            static_cast<double>(s.store.ssd.corrupt_blocks));
  set_total(into.add_counter("brigade_kv_store_disk_full_pauses_total",
                             "Times a full disk paused demotion to SSD.")
                .get(),
            static_cast<double>(s.store.disk_full_pauses));
  set_total(into.add_counter("brigade_kv_store_demotions_total",
                             "Blocks written to SSD after leaving host memory.")
                .get(),
            static_cast<double>(s.store.demotions));
  set_total(into.add_counter("brigade_kv_store_promotions_total",
                             "Blocks read from SSD back into host memory.")
                .get(),
            static_cast<double>(s.store.promotions));
}

}  // namespace

void collect_router_metrics(const router_status& router, metrics::registry& into) {
  collect_cache_metrics(router, into);
  into.add_gauge("brigade_num_requests_running", "Requests prefilling or decoding.")
      .get()
      .set(router.load.in_flight);
  into.add_gauge("brigade_num_requests_waiting", "Requests waiting for a worker.")
      .get()
      .set(router.load.queue_depth);
}

void collect_role_metrics(const role_statuses& roles, metrics::registry& into) {
  for (const auto& s : roles.kv_stores)
    collect_store_metrics(s, into);
  model::speculation_stats totals;
  for (const auto& s : roles.decode)
    totals.merge(s.speculation);
  serve::collect_speculation_metrics(totals, into);
}

void balance_metrics::collect(const supervisor_status& s, metrics::registry& into) {
  into.add_gauge("brigade_expert_balancedness",
                 "Mean over max of the per-shard expert load in the last sample window.")
      .get()
      .set(s.balancedness);
  auto& rebalances =
      into.add_counter("brigade_eplb_rebalances_total", "Expert re-plans by outcome.", {"outcome"});
  const std::pair<const char*, int64_t> outcomes[] = {{"adopted", s.rebalances_adopted},
                                                      {"rolled_back", s.rebalances_rolled_back},
                                                      {"rejected", s.rebalances_rejected}};
  for (const auto& [outcome, count] : outcomes)
    set_total(rebalances.with({outcome}), static_cast<double>(count));
  into.add_gauge("brigade_eplb_migration_in_progress", "1 while experts are migrating.")
      .get()
      .set(s.load.in_flight);
  auto& durations = into.add_histogram("brigade_eplb_migration_duration_seconds",
                                       "Duration of expert migrations, adopted or rolled back.",
                                       {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60})
                        .get();
  for (size_t i = observed_durations_; i < s.migration_durations_s.size(); ++i)
    durations.observe(s.migration_durations_s[i]);
  observed_durations_ = s.migration_durations_s.size();
}

}  // namespace brigade::deploy

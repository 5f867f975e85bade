#include "actors/cache_metrics.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <string>

namespace brigade::actors {
namespace {

constexpr std::array<const char*, 3> tiers{"pool", "host", "ssd"};

// Counters only grow: set one to a total the router keeps.
void set_total(metrics::counter& c, double total) {
  if (total > c.value()) c.inc(total - c.value());
}

}  // namespace

void collect_cache_metrics(const role_status& router, metrics::registry& into) {
  const auto d = nlohmann::json::parse(router.detail, nullptr, false);
  if (!d.is_object() || !d.contains("cache")) return;
  const auto& scenarios = d["cache"].value("scenarios", nlohmann::json::object());
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
  for (auto it = scenarios.begin(); it != scenarios.end(); ++it) {
    const double p = it.value().value("prompt_tokens", 0.0);
    set_total(prompt.with({it.key()}), p);
    double served = 0;
    for (size_t t = 0; t < tiers.size(); ++t) {
      const double h = it.value().value(tiers[t], 0.0);
      set_total(hits.with({it.key(), tiers[t]}), h);
      served += h;
      all_hits[t] += h;
    }
    all_prompt += p;
    scenario_rate.with({it.key()}).set(p > 0 ? served / p : 0.0);
  }
  for (size_t t = 0; t < tiers.size(); ++t) {
    tier_rate.with({tiers[t]}).set(all_prompt > 0 ? all_hits[t] / all_prompt : 0.0);
  }
}

void collect_store_metrics(const std::vector<role_status>& statuses, metrics::registry& into) {
  for (const auto& s : statuses) {
    if (s.role != "kv_store") continue;
    const auto d = nlohmann::json::parse(s.detail, nullptr, false);
    if (!d.is_object() || !d.value("open", false)) continue;
    auto& blocks =
        into.add_gauge("brigade_kv_store_blocks", "Blocks held by a KV store tier.", {"tier"});
    auto& bytes =
        into.add_gauge("brigade_kv_store_bytes", "Bytes held by a KV store tier.", {"tier"});
    auto& budget = into.add_gauge("brigade_kv_store_budget_bytes",
                                  "The byte budget of a KV store tier.", {"tier"});
    for (const char* tier : {"host", "ssd"}) {
      const auto& t = d.value(tier, nlohmann::json::object());
      blocks.with({tier}).set(t.value("blocks", 0.0));
      bytes.with({tier}).set(t.value("bytes", 0.0));
      budget.with({tier}).set(t.value("budget_bytes", 0.0));
    }
    set_total(into.add_counter("brigade_kv_store_corrupt_blocks_total",
                               "SSD blocks that failed their checksum: dropped, recomputed.")
                  .get(),
              d["ssd"].value("corrupt_blocks", 0.0));
    set_total(into.add_counter("brigade_kv_store_disk_full_pauses_total",
                               "Times a full disk paused demotion to SSD.")
                  .get(),
              d.value("disk_full_pauses", 0.0));
    set_total(into.add_counter("brigade_kv_store_demotions_total",
                               "Blocks written to SSD after leaving host memory.")
                  .get(),
              d.value("demotions", 0.0));
    set_total(into.add_counter("brigade_kv_store_promotions_total",
                               "Blocks read from SSD back into host memory.")
                  .get(),
              d.value("promotions", 0.0));
  }
}

}  // namespace brigade::actors

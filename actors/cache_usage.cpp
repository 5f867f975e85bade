#include "actors/cache_usage.hpp"

#include <nlohmann/json.hpp>

namespace brigade::actors {

cache_usage::cache_usage(std::vector<std::string> scenarios)
    : names_(std::move(scenarios)), by_scenario_(names_.size()) {}

void cache_usage::record(const prefix_hit& hit) {
  if (hit.scenario >= by_scenario_.size()) return;
  counts& c = by_scenario_[hit.scenario];
  c.prompt_tokens += hit.prompt_tokens;
  c.hit_tokens[0] += hit.pool_tokens;
  c.hit_tokens[1] += hit.host_tokens;
  c.hit_tokens[2] += hit.ssd_tokens;
}

std::string cache_usage::to_json() const {
  nlohmann::json scenarios = nlohmann::json::object();
  for (size_t i = 0; i < names_.size(); ++i) {
    nlohmann::json s{{"prompt_tokens", by_scenario_[i].prompt_tokens}};
    for (size_t t = 0; t < tiers.size(); ++t)
      s[tiers[t]] = by_scenario_[i].hit_tokens[t];
    scenarios[names_[i]] = s;
  }
  return nlohmann::json{{"scenarios", scenarios}}.dump();
}

}  // namespace brigade::actors

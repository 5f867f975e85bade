#include "actors/cache_usage.hpp"

namespace brigade::actors {

cache_usage::cache_usage(std::vector<std::string> scenarios) {
  for (auto& name : scenarios) {
    scenario_cache_usage u;
    u.scenario = std::move(name);
    by_scenario_.push_back(std::move(u));
  }
}

void cache_usage::record(const prefix_hit& hit) {
  if (hit.scenario >= by_scenario_.size()) return;
  scenario_cache_usage& c = by_scenario_[hit.scenario];
  c.prompt_tokens += hit.prompt_tokens;
  c.hit_tokens[0] += hit.pool_tokens;
  c.hit_tokens[1] += hit.host_tokens;
  c.hit_tokens[2] += hit.ssd_tokens;
}

}  // namespace brigade::actors

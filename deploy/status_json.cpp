#include "deploy/status_json.hpp"

#include <nlohmann/json.hpp>

#include "model/speculation_json.hpp"

namespace brigade::deploy {
namespace {

using nlohmann::json;

json entry(const role_status& s, json detail) {
  return {{"name", s.name},
          {"role", s.role},
          {"queue_depth", s.queue_depth},
          {"in_flight", s.in_flight},
          {"last_step_ms", s.last_step_ms},
          {"steps", s.steps},
          {"detail", std::move(detail)}};
}

json detail_of(const router_status& s) {
  json scenarios = json::object();
  for (const auto& u : s.cache_served) {
    json one{{"prompt_tokens", u.prompt_tokens}};
    for (size_t t = 0; t < cache_usage::tiers.size(); ++t)
      one[cache_usage::tiers[t]] = u.hit_tokens[t];
    scenarios[u.scenario] = one;
  }
  return {{"completed", s.completed},
          {"redispatched", s.redispatched},
          {"foreign_messages", s.foreign_messages},
          {"cache",
           {{"scenarios", scenarios},
            {"computed_tokens", s.computed_tokens},
            {"cached_blocks", s.cached_blocks},
            {"event_errors", s.cache_event_errors}}}};
}

json detail_of(const expert_shard_status& s) {
  const expert_copy_counts& r = s.experts_received;
  return {{"slots", s.slots},
          {"epochs", s.epochs},
          {"requests", s.requests},
          {"rows", s.rows},
          {"experts_sent", s.experts_sent},
          {"experts_received",
           {{"same_node", r.same_node},
            {"same_node_indexed", r.same_node_indexed},
            {"other_nodes", r.other_nodes},
            {"other_nodes_bytes", r.other_nodes_bytes},
            {"from_checkpoint", r.from_checkpoint}}}};
}

json tier_json(const kvcache::tier_stats& t) {
  return {{"blocks", t.blocks},
          {"bytes", t.bytes},
          {"budget_bytes", t.budget_bytes},
          {"hits", t.hits},
          {"misses", t.misses},
          {"insertions", t.insertions},
          {"evictions", t.evictions},
          {"expirations", t.expirations},
          {"corrupt_blocks", t.corrupt_blocks},
          {"disk_full_events", t.disk_full_events},
          {"io_errors", t.io_errors}};
}

json detail_of(const kv_store_status& s) {
  json d{{"lookups", s.lookups},
         {"demotion_batches", s.demotion_batches},
         {"open", s.open},
         {"open_error", s.open_error},
         {"block_bytes", s.block_bytes},
         {"bytes_per_token", s.block_tokens > 0 ? static_cast<double>(s.block_bytes) /
                                                      static_cast<double>(s.block_tokens)
                                                : 0.0}};
  if (!s.open) return d;
  const kvcache::store_stats& t = s.store;
  d["host"] = tier_json(t.host);
  d["ssd"] = tier_json(t.ssd);
  d["has_ssd"] = t.has_ssd;
  d["lookup_host_hits"] = t.lookup_host_hits;
  d["lookup_ssd_hits"] = t.lookup_ssd_hits;
  d["lookup_misses"] = t.lookup_misses;
  d["demotions"] = t.demotions;
  d["demotions_dropped"] = t.demotions_dropped;
  d["promotions"] = t.promotions;
  d["promotions_failed"] = t.promotions_failed;
  d["disk_full_pauses"] = t.disk_full_pauses;
  d["write_error_pauses"] = t.write_error_pauses;
  d["demotion_paused"] = t.demotion_paused;
  d["pending_demotions"] = t.pending_demotions;
  d["queue_depth"] = t.queue_depth;
  return d;
}

json detail_of(const prefill_status& s) {
  const prefix_cache_status& c = s.cache;
  json cache{{"enabled", c.enabled}};
  if (c.enabled) {
    cache = {{"enabled", true},
             {"cached_blocks", c.cached_blocks},
             {"pinned_blocks", c.pinned_blocks},
             {"capacity_blocks", c.capacity_blocks},
             {"used_blocks", c.used_blocks},
             {"prompt_tokens", c.prompt_tokens},
             {"pool_hit_tokens", c.pool_hit_tokens},
             {"host_hit_tokens", c.host_hit_tokens},
             {"ssd_hit_tokens", c.ssd_hit_tokens},
             {"admitting", c.admitting},
             {"demotion_batches", c.demotion_batches},
             {"invariant_checks", c.invariant_checks},
             {"invariant_violations", c.invariant_violations},
             {"first_violation", c.first_violation}};
  }
  return {{"tokens_prefilled", s.tokens_prefilled},
          {"busy_s", s.busy_s},
          {"free_kv_blocks", s.free_kv_blocks},
          {"stalled", s.stalled},
          {"epoch", s.epoch},
          {"cache", cache}};
}

json detail_of(const decode_status& s) {
  return {{"free_kv_blocks", s.free_kv_blocks},
          {"step_ms_total", s.step_ms_total},
          {"kv_blocks", s.kv_blocks},
          {"stalled", s.stalled},
          {"epoch", s.epoch},
          {"speculation", model::speculation_json(s.speculation, s.max_draft, s.draft,
                                                  s.draft_weights, s.draft_attention_window)}};
}

json detail_of(const node_status& s) {
  return {{"address", s.address},
          {"state", s.state},
          {"since_ms", s.since_ms},
          {"joins", s.joins},
          {"peer_id", std::to_string(s.peer_id)},
          {"last_error", s.last_error}};
}

template <class Status>
void add_all(json& out, const std::vector<Status>& all) {
  for (const auto& s : all)
    out.push_back(entry(s.load, detail_of(s)));
}

// Peers' error texts reach these documents: bytes that are not UTF-8 are replaced, not thrown on.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string statuses_json(const router_status* router, const role_statuses& roles,
                          const std::vector<node_status>& nodes) {
  json out = json::array();
  if (router) out.push_back(entry(router->load, detail_of(*router)));
  add_all(out, roles.expert_shards);
  add_all(out, roles.kv_stores);
  add_all(out, roles.prefill);
  add_all(out, roles.decode);
  for (const auto& n : nodes)
    out.push_back(entry(n.load, detail_of(n)));
  return dump(out);
}

std::string registry_json(const registry_snapshot& snapshot) {
  json j;
  j["version"] = snapshot.version;
  j["actors"] = json::array();
  for (const auto& e : snapshot.actors) {
    j["actors"].push_back(
        {{"name", e.name},
         {"role", e.role},
         {"node", e.node},
         {"generation", e.generation},
         {"spawned_ms", e.spawned_ms},
         {"alive", e.alive},
         {"death_cause", e.death_cause.empty() ? json(nullptr) : json(e.death_cause)},
         {"restarts", e.restarts}});
  }
  j["nodes"] = json::array();
  for (const auto& n : snapshot.nodes) {
    j["nodes"].push_back({{"name", n.name},
                          {"address", n.address},
                          {"state", n.state},
                          {"since_ms", n.since_ms},
                          {"joins", n.joins},
                          {"detail", n.detail}});
  }
  return dump(j);
}

}  // namespace brigade::deploy

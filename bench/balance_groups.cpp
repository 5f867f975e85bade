// `brigade bench balance --groups`: does keeping each expert group on one node cut the nodes a
// group-limited router's tokens reach, and what does it cost in balance?
//
// A DeepSeek-V3-like router (256 experts in 8 groups, each token's top 8 experts inside its 4
// best groups; see balance_group_routing.hpp) routes two independent samples of tokens per seed:
// the layouts are planned from the first sample's counts and scored on the second, each row sent
// where workers send it. Four placements per cluster: the planner and DeepSeek's EPLB, each with
// every group's replicas on one node and without (the planner then spreads an expert's replicas
// over the nodes; EPLB's hierarchical policy packs single experts onto nodes).
#include "bench/balance_groups.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/balance_group_routing.hpp"
#include "bench/table.hpp"
#include "eplb/deepseek_eplb.hpp"
#include "eplb/planner.hpp"

namespace brigade::bench {

namespace {

struct cluster {
  const char* name;
  int nodes;
  int shards;
  int slots_per_shard;
};

// 288 slots for 256 experts, as the balance benchmark's DeepSeek-V3-like shape.
const cluster clusters[] = {{"4 nodes x 8 shards x 9 slots", 4, 32, 9},
                            {"8 nodes x 4 shards x 9 slots", 8, 32, 9}};

struct placement {
  const char* algorithm;
  bool grouped;
};

const placement placements[] = {
    {"planner", false}, {"planner", true}, {"deepseek-eplb", false}, {"deepseek-eplb", true}};

const char* placement_name(const placement& p) {
  return p.grouped ? "groups per node" : "free";
}

result<eplb::layout> plan(const placement& p, const cluster& c, const group_router_config& router,
                          const eplb::load_matrix& load) {
  if (std::string(p.algorithm) == "deepseek-eplb") {
    return eplb::plan_deepseek_eplb(load, c.shards, c.slots_per_shard, c.nodes,
                                    p.grouped ? router.groups : 0);
  }
  eplb::planner_options o;
  o.shards = c.shards;
  o.slots_per_shard = c.slots_per_shard;
  o.nodes = c.nodes;
  o.expert_groups = router.groups;
  o.groups_per_node = p.grouped;
  return eplb::plan_layout(load, o, nullptr);
}

struct row {
  const cluster* where;
  const placement* how;
  std::vector<traffic_figures> per_seed;
};

traffic_figures mean_of(const std::vector<traffic_figures>& v) {
  traffic_figures m;
  for (const traffic_figures& f : v) {
    m.nodes_per_token += f.nodes_per_token / v.size();
    m.remote_nodes_per_token += f.remote_nodes_per_token / v.size();
    m.rows_off_node += f.rows_off_node / v.size();
    m.layer_max_over_mean += f.layer_max_over_mean / v.size();
    m.worst_layer_max_over_mean += f.worst_layer_max_over_mean / v.size();
  }
  return m;
}

group_router_config router_of(const group_bench_options& o) {
  group_router_config router;
  router.zipf_exponent = o.zipf_exponent;
  return router;
}

result<std::vector<row>> simulate(const group_bench_options& o) {
  const group_router_config router = router_of(o);
  std::vector<row> rows;
  for (const cluster& c : clusters) {
    for (const placement& p : placements)
      rows.push_back({&c, &p, {}});
  }
  for (uint64_t seed = o.seed; seed < o.seed + static_cast<uint64_t>(o.seeds); ++seed) {
    group_router r(router, o.layers, seed);
    const eplb::load_matrix load = routed_counts(r.route(o.tokens), router.experts);
    const std::vector<routed_layer> scored = r.route(o.tokens);
    for (row& x : rows) {
      auto planned = plan(*x.how, *x.where, router, load);
      if (!planned) {
        return error(planned.err().code, std::string(x.how->algorithm) + ", " +
                                             placement_name(*x.how) + ", seed " +
                                             std::to_string(seed) + ": " + planned.err().message);
      }
      x.per_seed.push_back(measure_traffic(*planned, x.where->nodes, scored));
    }
  }
  return rows;
}

/// The grouped row's figure over the free row's, for the same cluster and algorithm.
std::string ratio(double grouped, double free) {
  return fixed(grouped / free, 3) + "x";
}

void print_tables(const std::vector<row>& rows, const group_bench_options& o) {
  const group_router_config router = router_of(o);
  std::printf(
      "brigade bench balance --groups: %d experts in %d groups, each token's top %d experts inside "
      "its %d best groups (DeepSeek-V3's router), Zipf(%.2f) popularity; %d layers, %d tokens "
      "planned from and %d others scored per seed, %d seeds from %llu\n",
      router.experts, router.groups, router.top_k, router.topk_groups, router.zipf_exponent,
      o.layers, o.tokens, o.tokens, o.seeds, static_cast<unsigned long long>(o.seed));
  std::printf(
      "nodes/token: distinct nodes a token's expert rows go to (at most %d with groups per node); "
      "remote: those other than the token's own node; off node: share of rows sent to another "
      "node; layer m/m: busiest shard over the mean, per layer, summed; worst l.: the worst "
      "layer. Means over seeds.\n\n",
      router.topk_groups);
  table t({"cluster", "algorithm", "placement", "nodes/token", "remote/token", "off node",
           "layer m/m", "worst l."});
  for (const row& x : rows) {
    const traffic_figures m = mean_of(x.per_seed);
    t.add_row({x.where->name, x.how->algorithm, placement_name(*x.how), fixed(m.nodes_per_token, 3),
               fixed(m.remote_nodes_per_token, 3), fixed(100 * m.rows_off_node, 1) + "%",
               fixed(m.layer_max_over_mean, 4), fixed(m.worst_layer_max_over_mean, 4)});
  }
  std::printf("%s\ngroups per node over free:\n", t.render().c_str());
  table r({"cluster", "algorithm", "nodes/token", "remote/token", "layer m/m"});
  for (size_t i = 0; i + 1 < rows.size(); i += 2) {
    const traffic_figures free = mean_of(rows[i].per_seed);
    const traffic_figures grouped = mean_of(rows[i + 1].per_seed);
    r.add_row({rows[i].where->name, rows[i].how->algorithm,
               ratio(grouped.nodes_per_token, free.nodes_per_token),
               ratio(grouped.remote_nodes_per_token, free.remote_nodes_per_token),
               ratio(grouped.layer_max_over_mean, free.layer_max_over_mean)});
  }
  std::printf("%s", r.render().c_str());
}

nlohmann::json figures_json(const traffic_figures& f) {
  return {{"nodes_per_token", f.nodes_per_token},
          {"remote_nodes_per_token", f.remote_nodes_per_token},
          {"rows_off_node_fraction", f.rows_off_node},
          {"layer_max_over_mean", f.layer_max_over_mean},
          {"worst_layer_max_over_mean", f.worst_layer_max_over_mean}};
}

void print_json(const std::vector<row>& rows, const group_bench_options& o) {
  const group_router_config router = router_of(o);
  nlohmann::json doc;
  doc["benchmark"] = "balance_groups";
  doc["experts"] = router.experts;
  doc["expert_groups"] = router.groups;
  doc["topk_groups"] = router.topk_groups;
  doc["top_k"] = router.top_k;
  doc["zipf_exponent"] = router.zipf_exponent;
  doc["layers"] = o.layers;
  doc["tokens_per_sample"] = o.tokens;
  doc["seed"] = o.seed;
  doc["seeds"] = o.seeds;
  for (const row& x : rows) {
    nlohmann::json r = figures_json(mean_of(x.per_seed));
    r["cluster"] = x.where->name;
    r["nodes"] = x.where->nodes;
    r["algorithm"] = x.how->algorithm;
    r["groups_per_node"] = x.how->grouped;
    for (const traffic_figures& f : x.per_seed)
      r["per_seed"].push_back(figures_json(f));
    doc["results"].push_back(std::move(r));
  }
  for (size_t i = 0; i + 1 < rows.size(); i += 2) {
    const traffic_figures free = mean_of(rows[i].per_seed);
    const traffic_figures grouped = mean_of(rows[i + 1].per_seed);
    doc["grouped_over_free"].push_back(
        {{"cluster", rows[i].where->name},
         {"algorithm", rows[i].how->algorithm},
         {"nodes_per_token", grouped.nodes_per_token / free.nodes_per_token},
         {"remote_nodes_per_token", grouped.remote_nodes_per_token / free.remote_nodes_per_token},
         {"layer_max_over_mean", grouped.layer_max_over_mean / free.layer_max_over_mean}});
  }
  std::printf("%s\n", doc.dump().c_str());
}

}  // namespace

void add_group_options(CLI::App& app, bool& enabled, group_bench_options& o) {
  auto* groups = app.add_flag(
      "--groups", enabled,
      "instead of the figures above: layouts that keep each expert group on one node beside "
      "free ones, for a group-limited router (nodes a token reaches, balance)");
  app.add_option("--group-layers", o.layers, "with --groups: MoE layers per seed")
      ->check(CLI::Range(1, 256))
      ->needs(groups);
  app.add_option("--group-tokens", o.tokens,
                 "with --groups: tokens per layer in each sample (one planned from, one scored)")
      ->check(CLI::Range(64, 1 << 22))
      ->needs(groups);
  app.add_option("--group-seeds", o.seeds, "with --groups: seeds, from --seed on")
      ->check(CLI::Range(1, 100))
      ->needs(groups);
  app.add_option("--group-zipf", o.zipf_exponent,
                 "with --groups: Zipf exponent of the experts' popularity (0: all alike)")
      ->check(CLI::Range(0.0, 4.0))
      ->needs(groups);
}

int run_balance_groups(const group_bench_options& options) {
  auto rows = simulate(options);
  if (!rows) {
    std::fprintf(stderr, "brigade bench balance --groups: %s\n", rows.err().describe().c_str());
    return 1;
  }
  if (options.json) {
    print_json(*rows, options);
  } else {
    print_tables(*rows, options);
  }
  return 0;
}

}  // namespace brigade::bench

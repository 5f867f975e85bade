// A synthetic group-limited router for `brigade bench balance --groups`, and what a layout makes
// of the tokens it routes: the nodes each token's expert rows travel to and the shards' load.
//
// Each layer gives the experts a Zipf popularity over a random permutation. A token scores every
// expert with its log popularity plus Gumbel noise (so that its best experts are a draw from the
// popularity without replacement), picks the topk_groups groups with the highest sum of their two
// best scores, as DeepSeek-V3's router does, then its top_k experts inside those groups.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::bench {

struct group_router_config {
  int experts = 256;
  int groups = 8;       ///< n_group: group g holds experts [g * E / G, (g + 1) * E / G).
  int topk_groups = 4;  ///< topk_group: the groups each token picks.
  int top_k = 8;        ///< Experts per token, all inside its groups.
  double zipf_exponent = 0.65;
};

/// The experts of one layer's tokens: top_k per token, token after token.
struct routed_layer {
  std::vector<int32_t> experts;
  int top_k = 0;

  int tokens() const { return top_k > 0 ? static_cast<int>(experts.size()) / top_k : 0; }
};

class group_router {
 public:
  /// Draws every layer's popularity from `seed`; samples routed later draw from it too.
  group_router(const group_router_config& config, int layers, uint64_t seed);

  /// A sample of `tokens` tokens routed through every layer.
  std::vector<routed_layer> route(int tokens);

 private:
  void route_token(const std::vector<double>& log_popularity, int32_t* out);
  double gumbel();

  group_router_config config_;
  std::vector<std::vector<double>> log_popularity_;  ///< [layer][expert]
  uint64_t state_;
  std::vector<double> score_;  ///< Scratch: the token's score of each expert.
};

/// Rows routed to each expert of each layer, [layer][expert]: the load a planner sees.
eplb::load_matrix routed_counts(const std::vector<routed_layer>& sample, int experts);

/// What a layout makes of routed tokens, means over tokens and layers.
struct traffic_figures {
  double nodes_per_token = 0;         ///< Distinct nodes a token's expert rows go to.
  double remote_nodes_per_token = 0;  ///< Of those, the nodes other than the token's own.
  double rows_off_node = 0;           ///< Share of expert rows sent off the token's own node.
  /// Sum over layers of the busiest shard's rows over the sum of the layers' mean shard rows.
  double layer_max_over_mean = 0;
  double worst_layer_max_over_mean = 0;  ///< The worst single layer.
};

/// Sends each token's rows where workers do (replica token % replicas of each expert) under a
/// layout whose shards form `nodes` blocks of contiguous shards; the tokens run on the nodes in
/// equal blocks (the first tokens / nodes on node 0, ...).
traffic_figures measure_traffic(const eplb::layout& l, int nodes,
                                const std::vector<routed_layer>& sample);

}  // namespace brigade::bench

#include "bench/balance_group_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace brigade::bench {

group_router::group_router(const group_router_config& config, int layers, uint64_t seed)
    : config_(config), state_(seed * 0x9e3779b97f4a7c15ULL + 1), score_(config.experts) {
  std::mt19937_64 rng(seed);
  for (int layer = 0; layer < layers; ++layer) {
    std::vector<int> rank(static_cast<size_t>(config.experts));
    std::iota(rank.begin(), rank.end(), 0);
    std::shuffle(rank.begin(), rank.end(), rng);
    std::vector<double> log_popularity;
    for (int r : rank)
      log_popularity.push_back(-config.zipf_exponent * std::log(r + 1.0));
    log_popularity_.push_back(std::move(log_popularity));
  }
}

double group_router::gumbel() {
  // splitmix64: fast, and plenty for noise on scores.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const double u = (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
  return -std::log(-std::log(u));
}

void group_router::route_token(const std::vector<double>& log_popularity, int32_t* out) {
  const int per_group = config_.experts / config_.groups;
  for (int e = 0; e < config_.experts; ++e)
    score_[e] = log_popularity[e] + gumbel();
  // A group scores the sum of its two best experts (its only one, for groups of one).
  std::vector<std::pair<double, int>> group_score;
  for (int g = 0; g < config_.groups; ++g) {
    double first = -1e300, second = -1e300;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      if (score_[e] > first) {
        second = first;
        first = score_[e];
      } else if (score_[e] > second) {
        second = score_[e];
      }
    }
    group_score.emplace_back(-(first + (per_group > 1 ? second : 0)), g);
  }
  std::partial_sort(group_score.begin(), group_score.begin() + config_.topk_groups,
                    group_score.end());
  std::vector<std::pair<double, int32_t>> candidates;
  for (int i = 0; i < config_.topk_groups; ++i) {
    const int g = group_score[i].second;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e)
      candidates.emplace_back(-score_[e], e);
  }
  std::partial_sort(candidates.begin(), candidates.begin() + config_.top_k, candidates.end());
  for (int i = 0; i < config_.top_k; ++i)
    out[i] = candidates[i].second;
}

std::vector<routed_layer> group_router::route(int tokens) {
  std::vector<routed_layer> sample;
  for (const auto& log_popularity : log_popularity_) {
    routed_layer layer;
    layer.top_k = config_.top_k;
    layer.experts.resize(static_cast<size_t>(tokens) * config_.top_k);
    for (int t = 0; t < tokens; ++t)
      route_token(log_popularity, &layer.experts[static_cast<size_t>(t) * config_.top_k]);
    sample.push_back(std::move(layer));
  }
  return sample;
}

eplb::load_matrix routed_counts(const std::vector<routed_layer>& sample, int experts) {
  eplb::load_matrix counts(sample.size(), std::vector<double>(static_cast<size_t>(experts), 0.0));
  for (size_t layer = 0; layer < sample.size(); ++layer) {
    for (int32_t e : sample[layer].experts)
      counts[layer][e] += 1;
  }
  return counts;
}

traffic_figures measure_traffic(const eplb::layout& l, int nodes,
                                const std::vector<routed_layer>& sample) {
  const int shards_per_node = l.shards() / nodes;
  traffic_figures f;
  double tokens = 0, rows = 0, max_sum = 0, mean_sum = 0;
  std::vector<char> touched(static_cast<size_t>(nodes));
  for (size_t layer = 0; layer < sample.size(); ++layer) {
    const routed_layer& routed = sample[layer];
    std::vector<double> shard_rows(static_cast<size_t>(l.shards()), 0.0);
    for (int t = 0; t < routed.tokens(); ++t) {
      std::fill(touched.begin(), touched.end(), 0);
      // Contiguous blocks of tokens per node: independent of the replica a row takes.
      const int home = static_cast<int>(static_cast<int64_t>(t) * nodes / routed.tokens());
      for (int i = 0; i < routed.top_k; ++i) {
        const int32_t e = routed.experts[static_cast<size_t>(t) * routed.top_k + i];
        const int shard = l.shard_of(l.slot_for(static_cast<int>(layer), e, t));
        shard_rows[shard] += 1;
        touched[shard / shards_per_node] = 1;
        f.rows_off_node += shard / shards_per_node != home;
      }
      const int reached = static_cast<int>(std::count(touched.begin(), touched.end(), 1));
      f.nodes_per_token += reached;
      f.remote_nodes_per_token += reached - touched[home];
    }
    tokens += routed.tokens();
    rows += static_cast<double>(routed.experts.size());
    const double busiest = *std::max_element(shard_rows.begin(), shard_rows.end());
    const double mean = static_cast<double>(routed.experts.size()) / l.shards();
    max_sum += busiest;
    mean_sum += mean;
    f.worst_layer_max_over_mean = std::max(f.worst_layer_max_over_mean, busiest / mean);
  }
  f.nodes_per_token /= tokens;
  f.remote_nodes_per_token /= tokens;
  f.rows_off_node /= rows;
  f.layer_max_over_mean = max_sum / mean_sum;
  return f;
}

}  // namespace brigade::bench

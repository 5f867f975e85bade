// Random expert loads for the eplb tests: each draw names its seed so a failure can be replayed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "eplb/load_matrix.hpp"

namespace brigade::eplb::testing {

/// The load families the tests draw from; skewed ones resemble real routing, the others probe
/// corners (ties, idle experts, one expert taking almost everything).
enum class load_family { zipf, uniform_random, exponential, equal, mostly_idle, one_hot, count };

inline const char* family_name(load_family f) {
  switch (f) {
    case load_family::zipf:
      return "zipf";
    case load_family::uniform_random:
      return "uniform_random";
    case load_family::exponential:
      return "exponential";
    case load_family::equal:
      return "equal";
    case load_family::mostly_idle:
      return "mostly_idle";
    case load_family::one_hot:
      return "one_hot";
    case load_family::count:
      break;
  }
  return "?";
}

/// Loads of one family; Zipf draws its exponent from [0.3, 1.5] unless `zipf_exponent` is given.
inline load_matrix random_loads(int layers, int experts, load_family family, uint64_t seed,
                                double zipf_exponent = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double drawn = 0.3 + 1.2 * unit(rng);
  const double exponent = zipf_exponent > 0 ? zipf_exponent : drawn;
  load_matrix load(layers, std::vector<double>(experts, 0.0));
  for (auto& row : load) {
    std::vector<int> rank(experts);
    std::iota(rank.begin(), rank.end(), 0);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (int e = 0; e < experts; ++e) {
      switch (family) {
        case load_family::zipf:
          row[e] = 1e5 * std::pow(rank[e] + 1.0, -exponent);
          break;
        case load_family::uniform_random:
          row[e] = std::floor(1000 * unit(rng));
          break;
        case load_family::exponential:
          row[e] = -1000 * std::log(1 - unit(rng));
          break;
        case load_family::equal:
          row[e] = 500;
          break;
        case load_family::mostly_idle:
          row[e] = unit(rng) < 0.1 ? 1000 * unit(rng) : 0;
          break;
        case load_family::one_hot:
          row[e] = rank[e] == 0 ? 1e6 : 1;
          break;
        case load_family::count:
          break;
      }
    }
  }
  return load;
}

/// A random shape that can hold a layout: slots >= experts, slots per shard <= experts, nodes
/// dividing shards.
struct random_shape {
  int layers, experts, shards, slots_per_shard, nodes;
};

inline random_shape draw_shape(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  random_shape s{};
  s.layers = pick(1, 4);
  s.shards = pick(1, 24);
  s.experts = pick(std::max(2, s.shards / 2), 96);
  const int least_k = (s.experts + s.shards - 1) / s.shards;
  s.slots_per_shard = std::min(s.experts, least_k + pick(0, 3));
  std::vector<int> divisors;
  for (int n = 1; n <= s.shards; ++n) {
    if (s.shards % n == 0) divisors.push_back(n);
  }
  s.nodes = pick(0, 2) == 0 ? divisors[pick(0, static_cast<int>(divisors.size()) - 1)] : 1;
  return s;
}

}  // namespace brigade::eplb::testing

// `brigade bench balance --groups`: what keeping every expert group on one node buys a
// group-limited router (fewer nodes per token in the all-to-all) and what it costs in balance,
// for the planner and for DeepSeek's EPLB, each with groups per node and without.
#pragma once

#include <cstdint>

namespace CLI {
class App;
}

namespace brigade::bench {

struct group_bench_options {
  int layers = 8;
  int tokens = 16384;  ///< Tokens per layer in each sample: one to plan from, one to score.
  uint64_t seed = 1;   ///< The first seed; the samples use seed, seed + 1, ...
  int seeds = 5;
  double zipf_exponent = 0.65;  ///< Skew of the experts' popularity, and so of the groups' load.
  bool json = false;
};

/// Adds --groups (into `enabled`) and the options only it reads to `brigade bench balance`; the
/// options both modes share (--seed, --json) are the caller's.
void add_group_options(CLI::App& app, bool& enabled, group_bench_options& o);

/// Plans and scores every cluster shape, placement and seed, prints the tables (or one JSON
/// object) and returns the exit code.
int run_balance_groups(const group_bench_options& options);

}  // namespace brigade::bench

// Step times while experts migrate: decode steps through the topology while the supervisor
// moves experts to new layouts, beside the steps outside migrations, in one run.
#pragma once

#include <string>
#include <vector>

#include "bench/migration_phases.hpp"
#include "bench/sample_statistics.hpp"
#include "bench/step_plot.hpp"
#include "common/result.hpp"
#include "config/manifest.hpp"

namespace brigade::bench {

struct migration_stall_figures {
  bool two_nodes = false;  ///< Shards on two node processes: experts crossing over the data plane.
  int migrations = 0;      ///< Timed: fewer than asked when the sequences ran out of tokens.
  int migrations_asked = 0;
  int copy_interval_ms = 0;   ///< The shards' pause after each expert copied in.
  std::string transport_tls;  ///< The data plane's UCX_TLS between the nodes (two nodes only).
  double move_fraction = 0;   ///< The share of each layer's slots a migration moved.
  int steps_during = 0;
  int steps_outside = 0;
  double median_ms = 0;       ///< Median step time outside migrations.
  double p99_during_ms = 0;   ///< p99 of steps that overlapped a migration.
  double p99_outside_ms = 0;  ///< p99 of the others.
  double mean_migration_s = 0;
  // Every sequence's context grows by a token a step, so step times drift (about 2x over a run)
  // and a run-wide median mixes early and late steps. These divide each step by the median of
  // the 16 steps outside migrations nearest to it (8 before, 8 after, never itself).
  double local_median_during = 0;   ///< Median step during migrations over its local median.
  double local_p99_during = 0;      ///< p99 of the same: the figure the goal is about.
  double local_median_outside = 0;  ///< Median step outside migrations: about 1 by construction.
  double local_p99_outside = 0;     ///< p99 of steps outside migrations: the noise floor.
  // 95% intervals for the migrations' own share, local median (and p99) during over outside,
  // from a bootstrap that draws whole migration cycles: how far the run can tell the migrations'
  // cost from the machine's noise.
  ratio_interval local_median_share_interval;
  ratio_interval local_p99_share_interval;
  // The same against the steps in control windows, which overlap a window as long as the
  // migration and so are chosen as the steps during are: this takes out that the longer a step,
  // the likelier it overlaps a window at all.
  ratio_interval median_over_control_interval;
  ratio_interval p99_over_control_interval;
  // Steps overlapping control windows (as long as the migrations, between them, where nothing
  // happens): what overlapping a window of that length alone selects.
  int steps_control = 0;
  double local_median_control = 0;
  double local_p99_control = 0;
  /// p99 over median of fixed single-thread work as long as a median step, streaming memory as
  /// a step streams its KV cache, timed on this machine in the same run: the machine's own spread.
  double machine_p99_ratio = 0;
  /// The local ratios by where in a migration each step fell (migration_phases).
  std::vector<phase_figure> phases;
  /// Every timed step, the migration and control windows, in seconds from the first step: what
  /// `--steps-svg` draws.
  step_plot plot;
  double p99_ratio() const { return p99_during_ms / median_ms; }
  double noise_ratio() const { return p99_outside_ms / median_ms; }
  /// The migrations' own share of the p99: p99 during over p99 outside, each step over its local
  /// median; 0 without steps outside.
  double local_p99_share() const {
    return local_p99_outside > 0 ? local_p99_during / local_p99_outside : 0;
  }
  double median_over_control() const {
    return local_median_control > 0 ? local_median_during / local_median_control : 0;
  }
  double p99_over_control() const {
    return local_p99_control > 0 ? local_p99_during / local_p99_control : 0;
  }
  /// The same in the median: what migrations cost a typical step.
  double local_median_share() const {
    return local_median_outside > 0 ? local_median_during / local_median_outside : 0;
  }
};

struct migration_stall_options {
  /// Where each run writes its model and scratch files, in a directory of its own that it removes.
  std::string work_dir;
  int migrations = 100;
  /// Shards on two `brigade node` processes on loopback (2 each), so that experts that change
  /// nodes are copied over the data plane; otherwise everything runs in this process.
  bool two_nodes = false;
  /// Each shard's pause after every expert it copies in.
  int copy_interval_ms = config::eplb_policy{}.copy_interval_ms;
  /// The data plane's UCX_TLS between the two nodes: "tcp" (as between machines without RDMA),
  /// or shared memory ("posix,sysv,cma,self"), which moves the bytes with a fraction of the CPU.
  std::string transport_tls = "tcp";
  /// The share of each layer's slots a migration moves (random swaps between shards). 0 moves
  /// none: the switch protocol alone, under a new epoch.
  double move_fraction = 0.2;
};

/// Generates a model, decodes 32 sequences through a 4-shard topology and runs the migrations,
/// random re-plans, timing every step from the tokens' arrival; then times a fixed loop for the
/// machine's own floor.
result<migration_stall_figures> measure_migration_stall(const migration_stall_options& options);

}  // namespace brigade::bench

// The supervisor's expert load balancing, without actors: it sums the shards' load samples into
// windows, re-plans the layout every re-plan interval with the eplb planner, decides adoption by
// the margin, and keeps the history and events that introspection shows.
//
//   samples --(all shards reported window w)--> window complete --(every replan_windows)--> plan
//     --(gain >= margin)--> proposal (the supervisor migrates) --> adopted | rolled back
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eplb/layout.hpp"
#include "eplb/load_forecast.hpp"
#include "model/config.hpp"

namespace brigade::deploy {

struct rebalance_options {
  int64_t sample_interval_steps = 1000;   ///< Steps per load sample (window).
  int64_t replan_interval_steps = 10000;  ///< Steps between re-plans.
  double margin = 0.02;                   ///< Relative imbalance gain a plan must promise.
  size_t history_windows = 64;            ///< Windows kept for introspection.
  int copy_interval_ms = 0;  ///< The shards' pause after each expert copied in (shown only).
  /// What one plan may copy, as a fraction of the layout's slots counted in copies within a
  /// node; a copy from another node counts cross_node_copy_cost of them. Like the planner's
  /// max_moved_fraction, it bounds the moves a plan chooses, never those its replica counts need.
  double move_budget = 0.25;
  double cross_node_copy_cost = 2.0;
  /// A window whose busiest shard counted more than this over the mean, and more than three
  /// standard deviations of counting noise above it, brings the next plan forward (drift outran
  /// the cadence); 0 plans on the cadence alone.
  double early_replan_above = 0;
  /// The manifest's eplb.group_placement: node. Every replica of each of the model's expert
  /// groups then stays on one of `nodes` nodes, the shards of a node contiguous (manifest order).
  bool groups_per_node = false;
  int nodes = 1;  ///< Nodes hosting expert shards, as many each; read with groups_per_node.
};

/// Something introspection shows on /v1/events: expert balancing, and the cluster's faults and
/// recoveries, which the supervisor records here so that one stream tells both in order.
struct rebalance_event {
  int64_t unix_ms = 0;
  std::string kind;  ///< plan_adopted, plan_rejected, migration_started, migration_finished,
                     ///< migration_rolled_back, balance_measured, group_placement_refused;
                     ///< node_suspected, node_alive,
                     ///< node_lost, node_rejoined, role_died, role_restarted, role_adopted,
                     ///< role_moved_home, role_gave_up
  uint64_t epoch = 0;
  double predicted_balancedness = 0;  ///< For plans: the proposal's balancedness.
  double measured_balancedness = 0;   ///< For measurements: of the window just closed.
  int moved_slots = 0;
  double duration_s = 0;  ///< For finished or rolled-back migrations.
  std::string detail;
  std::string node;   ///< For cluster events: the node concerned.
  std::string actor;  ///< For role events: the role's name.
};

/// The migration in flight, as GET /v1/experts shows it.
struct migration_progress {
  bool running = false;  ///< false: no migration (the other fields are unset)
  uint64_t epoch = 0;
  bool switching = false;  ///< false while the shards prepare, true while workers switch
  int moved_slots = 0;
  size_t shards_prepared = 0;
  size_t workers_switched = 0;
  double elapsed_s = 0;
};

class rebalancer {
 public:
  /// With groups_per_node that the model or the shards cannot satisfy (n_group not divisible by
  /// the nodes, ...), experts are placed freely and a group_placement_refused event says why.
  rebalancer(const model::model_config& config, eplb::layout initial, rebalance_options options);

  /// A shard's token counts [layer][expert] for one window. Returns true when this sample
  /// completed the window (every shard reported).
  bool add_sample(int shard, uint64_t window, const std::vector<std::vector<int64_t>>& tokens);
  /// The window a shard starting now numbers its first sample: one past the newest any shard
  /// reported, so that a restarted shard's windows close with the others'.
  uint64_t next_window() const { return newest_window_ ? *newest_window_ + 1 : 0; }
  /// How far past the newest reported window a sample may be: shards count the same steps, so a
  /// sample further ahead is not one (and would stay open for ever).
  static constexpr uint64_t max_window_lead = 64;
  /// Windows some shard reported and others not yet.
  size_t open_windows() const { return open_.size(); }
  /// After a completed window: a proposal to migrate to, when a re-plan is due and pays. Shard s
  /// runs on node shard_node[s] (empty: all on one node): the plan's shards are numbered so that
  /// copies stay within nodes where they can, and its copies fit the move budget.
  std::optional<eplb::layout> plan_if_due(const std::vector<int>& shard_node = {});
  /// A proposal built from `seed` instead of loads (tests and fault injection). With
  /// move_fraction >= 1 every layer is reshuffled; below, random swaps between shards move about
  /// that fraction of each layer's slots, the size of a planner's adopted plan; 0 moves none.
  eplb::layout random_layout(uint64_t seed, double move_fraction = 1.0) const;

  /// The layout every worker now uses.
  const eplb::layout& current() const { return current_; }
  void adopt(const eplb::layout& l, double duration_s);
  void rolled_back(uint64_t epoch, double duration_s, const std::string& why);
  void migration_started(uint64_t epoch, int moved_slots);
  int moved_slots(const eplb::layout& to) const;

  const std::deque<rebalance_event>& events() const { return events_; }
  /// Records a cluster event (node and role faults, recoveries), stamped now.
  void add_event(rebalance_event ev) { record(std::move(ev)); }
  uint64_t events_total() const { return events_total_; }
  /// Current layout, per-shard load per window, balancedness history, as JSON.
  std::string to_json(const migration_progress& migration) const;
  double last_balancedness() const { return last_balancedness_; }
  int64_t adopted() const { return adopted_; }
  int64_t rolled_back_count() const { return rolled_back_; }
  int64_t rejected() const { return rejected_; }
  const std::vector<double>& migration_durations() const { return durations_; }

 private:
  struct window {
    std::vector<bool> reported;
    std::vector<std::vector<double>> load;  // [moe layer][expert]
    std::vector<double> shard_tokens;       // what each shard counted, all layers
  };
  struct closed_window {
    uint64_t window = 0;
    std::vector<double> shard_load;  // summed over layers
    double balancedness = 1;
    uint64_t epoch = 0;                 // the layout in use when it closed
    std::vector<double> shard_counted;  // the shards' own counts (shard_load is the layout's)
  };
  void record(rebalance_event ev);

  std::vector<int> moe_layers_;
  int expert_groups_ = 1;  ///< The model's n_group.
  eplb::layout current_;
  rebalance_options options_;
  std::map<uint64_t, window> open_;
  std::optional<uint64_t> newest_window_;        // the newest window any shard reported
  std::vector<std::vector<double>> since_plan_;  // [moe layer][expert]
  // The load of the interval a plan will serve, forecast from the intervals before it: under
  // drift a plan made from the last interval fits the one that has passed.
  eplb::load_forecast forecast_;
  int windows_since_plan_ = 0;
  std::deque<closed_window> history_;
  std::deque<rebalance_event> events_;
  uint64_t events_total_ = 0;
  double last_balancedness_ = 1;
  int64_t adopted_ = 0, rolled_back_ = 0, rejected_ = 0;
  std::vector<double> durations_;
};

}  // namespace brigade::deploy

#include "deploy/rebalancer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "common/wall_clock.hpp"
#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/expert_groups.hpp"
#include "eplb/node_alignment.hpp"
#include "eplb/planner.hpp"

namespace brigade::deploy {
rebalancer::rebalancer(const model::model_config& config, eplb::layout initial,
                       rebalance_options options)
    : current_(std::move(initial)), options_(options) {
  moe_layers_ = config.moe_layers();
  expert_groups_ = config.expert_groups;
  since_plan_.assign(moe_layers_.size(),
                     std::vector<double>(static_cast<size_t>(config.num_experts)));
  if (!options_.groups_per_node) return;
  status s = options_.nodes > 0 && current_.shards() % options_.nodes == 0
                 ? eplb::validate_expert_groups(current_.experts(), current_.shards(),
                                                current_.slots_per_shard(), options_.nodes,
                                                expert_groups_, true)
                 : status(error(errc::invalid_argument,
                                std::to_string(options_.nodes) + " nodes do not divide " +
                                    std::to_string(current_.shards()) + " shards"));
  if (s) return;
  options_.groups_per_node = false;
  rebalance_event ev;
  ev.kind = "group_placement_refused";
  ev.detail = "eplb.group_placement is node, but the model's " + std::to_string(expert_groups_) +
              " expert groups (n_group) cannot be kept on " + std::to_string(options_.nodes) +
              " nodes of " + std::to_string(current_.shards()) + " shards x " +
              std::to_string(current_.slots_per_shard()) + " slots: " + s.err().message +
              "; experts are placed freely";
  record(std::move(ev));
}

bool rebalancer::add_sample(int shard, uint64_t window_id,
                            const std::vector<std::vector<int64_t>>& tokens) {
  // A sample with too few layers or a negative count (a shard of another model, a corrupted
  // message from a peer), of no shard, or far ahead of every other sample is ignored rather than
  // read past its rows, let into the loads, or left open for ever.
  if (shard < 0 || shard >= current_.shards()) return false;
  if (window_id > next_window() + max_window_lead) return false;
  for (int layer : moe_layers_) {
    if (static_cast<size_t>(layer) >= tokens.size()) return false;
  }
  for (const auto& row : tokens) {
    if (std::any_of(row.begin(), row.end(), [](int64_t n) { return n < 0; })) return false;
  }
  if (!open_.count(window_id)) {
    // Windows a shard never reports (it died and was given up) would pile up: keep the newest.
    while (open_.size() >= 2 * max_window_lead)
      open_.erase(open_.begin());
  }
  window& w = open_[window_id];
  if (w.reported.empty()) {
    w.reported.assign(static_cast<size_t>(current_.shards()), false);
    w.load.assign(moe_layers_.size(), std::vector<double>(static_cast<size_t>(current_.experts())));
    w.shard_tokens.assign(static_cast<size_t>(current_.shards()), 0.0);
  }
  if (w.reported[static_cast<size_t>(shard)]) return false;
  w.reported[static_cast<size_t>(shard)] = true;
  newest_window_ = std::max(newest_window_.value_or(0), window_id);
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    const auto& row = tokens[static_cast<size_t>(moe_layers_[i])];
    for (size_t e = 0; e < row.size() && e < w.load[i].size(); ++e) {
      w.load[i][e] += row[e];
      w.shard_tokens[static_cast<size_t>(shard)] += row[e];
    }
  }
  if (!std::all_of(w.reported.begin(), w.reported.end(), [](bool r) { return r; })) return false;
  // The window is complete: measure it under the current layout and keep it.
  closed_window closed;
  closed.window = window_id;
  closed.epoch = current_.epoch();
  closed.shard_counted = w.shard_tokens;
  const auto report = eplb::measure_balance(current_, w.load);
  closed.balancedness = report.balancedness;
  closed.shard_load.assign(static_cast<size_t>(current_.shards()), 0.0);
  for (int l = 0; l < current_.layers(); ++l) {
    const auto loads = eplb::shard_loads(current_, w.load, l);
    for (size_t s = 0; s < loads.size(); ++s)
      closed.shard_load[s] += loads[s];
  }
  last_balancedness_ = report.balancedness;
  for (size_t i = 0; i < w.load.size(); ++i) {
    for (size_t e = 0; e < w.load[i].size(); ++e)
      since_plan_[i][e] += w.load[i][e];
  }
  ++windows_since_plan_;
  history_.push_back(std::move(closed));
  while (history_.size() > options_.history_windows)
    history_.pop_front();
  open_.erase(open_.begin(), open_.upper_bound(window_id));
  rebalance_event ev;
  ev.kind = "balance_measured";
  ev.epoch = current_.epoch();
  ev.measured_balancedness = history_.back().balancedness;
  record(ev);
  return true;
}

namespace {

// Whether a window's busiest shard, by the shards' own counts, stood more than `above` over the
// mean, and further than counting noise carries a shard: a shard's rows vary by about the square
// root of their number, so in a small window chance alone crosses any threshold, and every
// crossing would cost a plan and a migration. Three standard deviations keep that rare.
bool lopsided_window(const std::vector<double>& loads, double above) {
  if (loads.empty() || above <= 0) return false;
  double sum = 0.0;
  for (double l : loads)
    sum += l;
  const double mean = sum / static_cast<double>(loads.size());
  const double ratio = eplb::max_over_mean(loads);
  return ratio > above && (ratio - 1.0) * mean > 3.0 * std::sqrt(mean);
}

}  // namespace

std::optional<eplb::layout> rebalancer::plan_if_due(const std::vector<int>& shard_node) {
  const int64_t windows_per_plan =
      std::max<int64_t>(1, options_.replan_interval_steps / options_.sample_interval_steps);
  // Early: the last window's shards, by their own counts, were further apart than allowed.
  const bool lopsided = windows_since_plan_ > 0 && !history_.empty() &&
                        lopsided_window(history_.back().shard_counted, options_.early_replan_above);
  if (windows_since_plan_ < windows_per_plan && !lopsided) return std::nullopt;
  if (!forecast_.observe(since_plan_)) return std::nullopt;
  windows_since_plan_ = 0;
  for (auto& row : since_plan_)
    std::fill(row.begin(), row.end(), 0.0);
  // Planned for the forecast (hedged: spread replicas toward the least predictable experts),
  // judged on the load expected next.
  const eplb::load_matrix planning = forecast_.planning_load();
  const eplb::load_matrix load = forecast_.expected();
  eplb::planner_options opt;
  opt.shards = current_.shards();
  opt.slots_per_shard = current_.slots_per_shard();
  opt.max_moved_fraction = options_.move_budget;
  if (options_.groups_per_node) {
    opt.nodes = options_.nodes;
    opt.expert_groups = expert_groups_;
    opt.groups_per_node = true;
  }
  const double budget = options_.move_budget * current_.slots() * current_.layers();
  // Plan, number the shards for the nodes, and charge the copies; a plan over the budget (its
  // copies cross nodes) is made again with fewer moves allowed, in proportion.
  std::optional<eplb::layout> proposal;
  eplb::move_cost cost;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto planned = eplb::plan_layout(planning, opt, &current_);
    if (!planned) return std::nullopt;
    proposal =
        eplb::align_to_nodes(current_, planned.value(), shard_node, options_.cross_node_copy_cost);
    // Numbered for cheap copies, a grouped plan may split a group over nodes; the planner's own
    // numbering never does.
    if (opt.groups_per_node &&
        !eplb::groups_stay_on_nodes(*proposal, opt.nodes, opt.expert_groups)) {
      proposal = std::move(planned.value());
    }
    cost = eplb::measure_moves(current_, *proposal, shard_node, options_.cross_node_copy_cost);
    if (cost.units <= budget) break;
    opt.max_moved_fraction *= budget / cost.units;
  }
  // As in the planner, the budget bounds the moves a plan chooses, not the ones its new replica
  // counts need: a plan still over it after the retries is judged on its gain alone.
  const auto decision = eplb::judge_adoption(current_, *proposal, load, options_.margin);
  // A layout that splits groups over nodes (the initial one) is left whatever the gain: the
  // placement asks for it, and a token's all-to-all reaches fewer nodes once it is done.
  const bool regroup = opt.groups_per_node && decision.moved_slots > 0 &&
                       !eplb::groups_stay_on_nodes(current_, opt.nodes, opt.expert_groups);
  const bool adopt = decision.adopt || regroup;
  rebalance_event ev;
  ev.kind = adopt ? "plan_adopted" : "plan_rejected";
  ev.epoch = proposal->epoch();
  ev.predicted_balancedness = eplb::measure_balance(*proposal, load).balancedness;
  ev.moved_slots = decision.moved_slots;
  ev.detail = "imbalance " + std::to_string(decision.current_imbalance) + " -> " +
              std::to_string(decision.proposed_imbalance) + "; copies " +
              std::to_string(cost.within_node) + " within a node, " +
              std::to_string(cost.across_nodes) + " across nodes (" + std::to_string(cost.units) +
              " of a budget of " + std::to_string(budget) +
              (cost.units > budget ? ", over it: the new replica counts need these copies" : "") +
              ")" + (regroup ? "; brings every expert group onto one node" : "");
  record(ev);
  if (!adopt) {
    ++rejected_;
    return std::nullopt;
  }
  return std::move(*proposal);
}

namespace {

// Whether shard `shard` (slots_per_shard slots) of `map` holds `expert` anywhere but `except`.
bool shard_holds(const std::vector<int32_t>& map, int slots_per_shard, int shard, int32_t expert,
                 int except) {
  for (int slot = shard * slots_per_shard; slot < (shard + 1) * slots_per_shard; ++slot) {
    if (slot != except && map[static_cast<size_t>(slot)] == expert) return true;
  }
  return false;
}

// Swaps random pairs of slots on different shards until about `fraction` of the layer's slots
// hold another expert; a swap that would put two copies of an expert on one shard is skipped.
void swap_slots(std::vector<int32_t>& map, int slots_per_shard, double fraction,
                std::mt19937_64& rng) {
  const int slots = static_cast<int>(map.size());
  // Any fraction above zero moves at least one pair; zero moves none (a new epoch alone, which
  // times the switch protocol by itself).
  if (fraction <= 0) return;
  const int swaps = std::max(1, static_cast<int>(fraction * slots / 2));
  for (int done = 0, attempts = 0; done < swaps && attempts < 100 * swaps; ++attempts) {
    const int a = static_cast<int>(rng() % static_cast<uint64_t>(slots));
    const int b = static_cast<int>(rng() % static_cast<uint64_t>(slots));
    const int shard_a = a / slots_per_shard, shard_b = b / slots_per_shard;
    const int32_t ea = map[static_cast<size_t>(a)], eb = map[static_cast<size_t>(b)];
    if (shard_a == shard_b || ea == eb || shard_holds(map, slots_per_shard, shard_a, eb, a) ||
        shard_holds(map, slots_per_shard, shard_b, ea, b)) {
      continue;
    }
    std::swap(map[static_cast<size_t>(a)], map[static_cast<size_t>(b)]);
    ++done;
  }
}

}  // namespace

eplb::layout rebalancer::random_layout(uint64_t seed, double move_fraction) const {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> phy2log = current_.phy2log();
  const int experts = current_.experts();
  const int per_shard = current_.slots_per_shard();
  for (auto& map : phy2log) {
    if (move_fraction < 1.0) {
      swap_slots(map, per_shard, move_fraction, rng);
      continue;
    }
    // Every expert once in a random slot order, spare slots random replicas; reshuffled until
    // no shard holds an expert twice.
    std::vector<int32_t> shuffled(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e)
      shuffled[static_cast<size_t>(e)] = e;
    while (shuffled.size() < map.size())
      shuffled.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(experts)));
    for (int attempt = 0; attempt < 1000; ++attempt) {
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      bool apart = true;
      for (int slot = 0; slot < static_cast<int>(shuffled.size()) && apart; ++slot) {
        apart = !shard_holds(shuffled, per_shard, slot / per_shard,
                             shuffled[static_cast<size_t>(slot)], slot);
      }
      if (apart) {
        map = shuffled;
        break;
      }
    }
  }
  auto out = eplb::layout::from_phy2log(current_.shape(), std::move(phy2log), current_.epoch() + 1);
  // Replicas that could not be placed apart keep the layout (with the next epoch).
  if (!out) {
    out = eplb::layout::from_phy2log(current_.shape(), current_.phy2log(), current_.epoch() + 1);
  }
  return std::move(out.value());
}

int rebalancer::moved_slots(const eplb::layout& to) const {
  return eplb::moved_slots(current_, to);
}

void rebalancer::adopt(const eplb::layout& l, double duration_s) {
  current_ = l;
  ++adopted_;
  durations_.push_back(duration_s);
  rebalance_event ev;
  ev.kind = "migration_finished";
  ev.epoch = l.epoch();
  ev.duration_s = duration_s;
  record(ev);
}

void rebalancer::rolled_back(uint64_t epoch, double duration_s, const std::string& why) {
  ++rolled_back_;
  durations_.push_back(duration_s);
  rebalance_event ev;
  ev.kind = "migration_rolled_back";
  ev.epoch = epoch;
  ev.duration_s = duration_s;
  ev.detail = why;
  record(ev);
}

void rebalancer::migration_started(uint64_t epoch, int moved) {
  rebalance_event ev;
  ev.kind = "migration_started";
  ev.epoch = epoch;
  ev.moved_slots = moved;
  record(ev);
}

void rebalancer::record(rebalance_event ev) {
  ev.unix_ms = unix_ms();
  events_.push_back(std::move(ev));
  ++events_total_;
  while (events_.size() > 256)
    events_.pop_front();
}

std::string rebalancer::to_json(const migration_progress& m) const {
  nlohmann::json j;
  j["epoch"] = current_.epoch();
  j["shards"] = current_.shards();
  j["slots_per_shard"] = current_.slots_per_shard();
  j["experts"] = current_.experts();
  j["sample_interval_steps"] = options_.sample_interval_steps;
  j["replan_interval_steps"] = options_.replan_interval_steps;
  j["margin"] = options_.margin;
  j["copy_interval_ms"] = options_.copy_interval_ms;
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    layers.push_back(
        {{"layer", moe_layers_[i]}, {"phy2log", current_.phy2log(static_cast<int>(i))}});
  }
  j["layout"] = layers;
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : history_) {
    windows.push_back({{"window", w.window},
                       {"epoch", w.epoch},
                       {"shard_load", w.shard_load},
                       {"shard_counted", w.shard_counted},
                       {"max_over_mean", eplb::max_over_mean(w.shard_counted)},
                       {"balancedness", w.balancedness}});
  }
  j["windows"] = windows;
  j["balancedness"] = last_balancedness_;
  j["rebalances"] = {{"adopted", adopted_}, {"rolled_back", rolled_back_}, {"rejected", rejected_}};
  j["migration"] = nullptr;
  if (m.running) {
    j["migration"] = {{"epoch", m.epoch},
                      {"phase", m.switching ? "switching" : "preparing"},
                      {"moved_slots", m.moved_slots},
                      {"shards_prepared", m.shards_prepared},
                      {"workers_switched", m.workers_switched},
                      {"elapsed_s", m.elapsed_s}};
  }
  return j.dump();
}

}  // namespace brigade::deploy

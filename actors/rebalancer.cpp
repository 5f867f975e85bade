#include "actors/rebalancer.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "eplb/adoption.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/planner.hpp"

namespace brigade::actors {
namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

rebalancer::rebalancer(const model::model_config& config, expert_layout initial,
                       rebalance_options options)
    : current_(std::move(initial)), options_(options) {
  for (int l = 0; l < config.num_layers; ++l) {
    if (config.is_moe_layer(l)) moe_layers_.push_back(l);
  }
  since_plan_.assign(moe_layers_.size(),
                     std::vector<double>(static_cast<size_t>(config.num_experts)));
}

result<eplb::layout> rebalancer::to_eplb(const expert_layout& l) const {
  eplb::layout_shape shape;
  shape.layers = static_cast<int>(moe_layers_.size());
  shape.experts = l.experts;
  shape.shards = l.shards;
  shape.slots_per_shard = l.slots_per_shard;
  std::vector<std::vector<int32_t>> phy2log;
  for (int layer : moe_layers_)
    phy2log.push_back(l.phy2log[static_cast<size_t>(layer)]);
  return eplb::layout::from_phy2log(shape, std::move(phy2log), l.epoch);
}

expert_layout rebalancer::from_eplb(const eplb::layout& l) const {
  expert_layout out = current_;
  out.epoch = l.epoch();
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    out.phy2log[static_cast<size_t>(moe_layers_[i])] = l.phy2log(static_cast<int>(i));
  }
  out.index();
  return out;
}

bool rebalancer::add_sample(int shard, uint64_t window_id,
                            const std::vector<std::vector<int64_t>>& tokens) {
  // A sample with too few layers or a negative count (a shard of another model, a corrupted
  // message from a peer), of no shard, or far ahead of every other sample is ignored rather than
  // read past its rows, let into the loads, or left open for ever.
  if (shard < 0 || shard >= current_.shards) return false;
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
    w.reported.assign(static_cast<size_t>(current_.shards), false);
    w.load.assign(moe_layers_.size(), std::vector<double>(static_cast<size_t>(current_.experts)));
  }
  if (w.reported[static_cast<size_t>(shard)]) return false;
  w.reported[static_cast<size_t>(shard)] = true;
  newest_window_ = std::max(newest_window_.value_or(0), window_id);
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    const auto& row = tokens[static_cast<size_t>(moe_layers_[i])];
    for (size_t e = 0; e < row.size() && e < w.load[i].size(); ++e)
      w.load[i][e] += row[e];
  }
  if (!std::all_of(w.reported.begin(), w.reported.end(), [](bool r) { return r; })) return false;
  // The window is complete: measure it under the current layout and keep it.
  closed_window closed;
  closed.window = window_id;
  auto layout = to_eplb(current_);
  if (layout) {
    const auto report = eplb::measure_balance(layout.value(), w.load);
    closed.balancedness = report.balancedness;
    closed.shard_load.assign(static_cast<size_t>(current_.shards), 0.0);
    for (int l = 0; l < layout->layers(); ++l) {
      const auto loads = eplb::shard_loads(layout.value(), w.load, l);
      for (size_t s = 0; s < loads.size(); ++s)
        closed.shard_load[s] += loads[s];
    }
    last_balancedness_ = report.balancedness;
  }
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
  ev.epoch = current_.epoch;
  ev.measured_balancedness = history_.back().balancedness;
  record(ev);
  return true;
}

std::optional<expert_layout> rebalancer::plan_if_due() {
  const int64_t windows_per_plan =
      std::max<int64_t>(1, options_.replan_interval_steps / options_.sample_interval_steps);
  if (windows_since_plan_ < windows_per_plan) return std::nullopt;
  const auto load = since_plan_;
  windows_since_plan_ = 0;
  for (auto& row : since_plan_)
    std::fill(row.begin(), row.end(), 0.0);
  auto current = to_eplb(current_);
  if (!current) return std::nullopt;
  eplb::planner_options opt;
  opt.shards = current_.shards;
  opt.slots_per_shard = current_.slots_per_shard;
  auto proposal = eplb::plan_layout(load, opt, &current.value());
  if (!proposal) return std::nullopt;
  const auto decision =
      eplb::judge_adoption(current.value(), proposal.value(), load, options_.margin);
  rebalance_event ev;
  ev.kind = decision.adopt ? "plan_adopted" : "plan_rejected";
  ev.epoch = proposal->epoch();
  ev.predicted_balancedness = eplb::measure_balance(proposal.value(), load).balancedness;
  ev.moved_slots = decision.moved_slots;
  ev.detail = "imbalance " + std::to_string(decision.current_imbalance) + " -> " +
              std::to_string(decision.proposed_imbalance);
  record(ev);
  if (!decision.adopt) {
    ++rejected_;
    return std::nullopt;
  }
  return from_eplb(proposal.value());
}

namespace {

// Swaps random pairs of slots on different shards until about `fraction` of the layer's slots
// hold another expert; a swap that would put two copies of an expert on one shard is undone.
void swap_slots(expert_layout& out, int layer, double fraction, std::mt19937_64& rng) {
  auto& map = out.phy2log[static_cast<size_t>(layer)];
  const int slots = static_cast<int>(map.size());
  // Any fraction above zero moves at least one pair; zero moves none (a new epoch alone, which
  // times the switch protocol by itself).
  if (fraction <= 0) return;
  const int swaps = std::max(1, static_cast<int>(fraction * slots / 2));
  for (int done = 0, attempts = 0; done < swaps && attempts < 100 * swaps; ++attempts) {
    const int a = static_cast<int>(rng() % static_cast<uint64_t>(slots));
    const int b = static_cast<int>(rng() % static_cast<uint64_t>(slots));
    if (out.shard_of(a) == out.shard_of(b) ||
        map[static_cast<size_t>(a)] == map[static_cast<size_t>(b)]) {
      continue;
    }
    std::swap(map[static_cast<size_t>(a)], map[static_cast<size_t>(b)]);
    out.index();
    if (out.check().ok()) {
      ++done;
    } else {
      std::swap(map[static_cast<size_t>(a)], map[static_cast<size_t>(b)]);
    }
  }
}

}  // namespace

expert_layout rebalancer::random_layout(uint64_t seed, double move_fraction) const {
  std::mt19937_64 rng(seed);
  expert_layout out = current_;
  out.epoch = current_.epoch + 1;
  const int slots = out.shards * out.slots_per_shard;
  if (move_fraction < 1.0) {
    for (int layer : moe_layers_)
      swap_slots(out, layer, move_fraction, rng);
    out.index();
    return out;
  }
  for (int layer : moe_layers_) {
    // Every expert once in a random slot order, spare slots random replicas; then repair any
    // shard holding an expert twice by swapping with a slot elsewhere.
    std::vector<int32_t> experts(static_cast<size_t>(out.experts));
    for (int e = 0; e < out.experts; ++e)
      experts[static_cast<size_t>(e)] = e;
    std::vector<int32_t> map = experts;
    while (static_cast<int>(map.size()) < slots) {
      map.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(out.experts)));
    }
    for (int attempt = 0; attempt < 1000; ++attempt) {
      std::shuffle(map.begin(), map.end(), rng);
      out.phy2log[static_cast<size_t>(layer)] = map;
      out.index();
      if (out.check().ok()) break;
    }
  }
  out.index();
  if (!out.check().ok()) return current_;  // could not place replicas apart: keep the layout
  return out;
}

int rebalancer::moved_slots(const expert_layout& to) const {
  auto a = to_eplb(current_);
  auto b = to_eplb(to);
  return a && b ? eplb::moved_slots(a.value(), b.value()) : 0;
}

void rebalancer::adopt(const expert_layout& l, double duration_s) {
  current_ = l;
  ++adopted_;
  durations_.push_back(duration_s);
  rebalance_event ev;
  ev.kind = "migration_finished";
  ev.epoch = l.epoch;
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

std::string rebalancer::to_json(const std::string& migration_json) const {
  nlohmann::json j;
  j["epoch"] = current_.epoch;
  j["shards"] = current_.shards;
  j["slots_per_shard"] = current_.slots_per_shard;
  j["experts"] = current_.experts;
  j["sample_interval_steps"] = options_.sample_interval_steps;
  j["replan_interval_steps"] = options_.replan_interval_steps;
  j["margin"] = options_.margin;
  j["copy_interval_ms"] = options_.copy_interval_ms;
  nlohmann::json layers = nlohmann::json::array();
  for (int layer : moe_layers_) {
    layers.push_back({{"layer", layer}, {"phy2log", current_.phy2log[static_cast<size_t>(layer)]}});
  }
  j["layout"] = layers;
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : history_) {
    windows.push_back(
        {{"window", w.window}, {"shard_load", w.shard_load}, {"balancedness", w.balancedness}});
  }
  j["windows"] = windows;
  j["balancedness"] = last_balancedness_;
  j["rebalances"] = {{"adopted", adopted_}, {"rolled_back", rolled_back_}, {"rejected", rejected_}};
  j["migration"] = nlohmann::json::parse(migration_json, nullptr, false);
  return j.dump();
}

}  // namespace brigade::actors

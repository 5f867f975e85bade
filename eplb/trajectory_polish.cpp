#include "eplb/trajectory_polish.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <string>
#include <utility>

#include "eplb/balance_metrics.hpp"

namespace brigade::eplb {
namespace {

/// The three busiest shards of one point, busiest first (-1 where there are fewer shards): the
/// busiest shard that a swap between two shards leaves untouched is among them.
struct top_three {
  std::array<int, 3> shard = {-1, -1, -1};
  std::array<double, 3> load = {0, 0, 0};

  void offer(int s, double l) {
    for (int i = 0; i < 3; ++i) {
      if (shard[i] < 0 || l > load[i]) {
        for (int j = 2; j > i; --j) {
          shard[j] = shard[j - 1];
          load[j] = load[j - 1];
        }
        shard[i] = s;
        load[i] = l;
        return;
      }
    }
  }
  /// The busiest load on a shard other than a and b.
  double busiest_besides(int a, int b) const {
    for (int i = 0; i < 3; ++i) {
      if (shard[i] >= 0 && shard[i] != a && shard[i] != b) return load[i];
    }
    return 0;
  }
};

/// One layer's polish: the row, each slot's load at every point, each shard's load at every
/// point, and what the current layout held, for the move count.
class layer_polish {
 public:
  layer_polish(const layout& proposed, const std::vector<load_matrix>& trajectory, int layer,
               const layout* current, const polish_terms& terms);

  /// Makes the swap that lowers the summed busiest loads most; false when none lowers them.
  bool improve_once();
  std::vector<int32_t> take_row() { return std::move(row_); }
  /// Slots of the row whose expert the current layout's shard does not hold (0 without one).
  int moved() const { return moved_; }
  /// Lets swaps take the row up to `max_moved` slots off the current layout; at first, no
  /// further than the plan took it.
  void allow_moves(int max_moved) { max_moved_ = std::max(moved_, max_moved); }

 private:
  struct swap_choice {
    int slot_a = -1;
    int slot_b = -1;
    double objective = 0;
  };
  void consider_swaps_from(int shard, const std::vector<top_three>& top, swap_choice& best) const;
  void apply(int slot_a, int slot_b);
  bool holds(int shard, int32_t expert) const { return holds_[index(shard, expert)] != 0; }
  bool was_there(int shard, int32_t expert) const {
    return was_.empty() || was_[index(shard, expert)] != 0;
  }
  size_t index(int shard, int32_t expert) const {
    return static_cast<size_t>(shard) * experts_ + expert;
  }
  double& shard_load(int point, int shard) { return shard_load_[point * shards_ + shard]; }
  double shard_load(int point, int shard) const { return shard_load_[point * shards_ + shard]; }
  double slot_load(int point, int slot) const { return slot_load_[point * slots_ + slot]; }

  int points_;
  int experts_;
  int shards_;
  int per_shard_;
  int slots_;
  int shards_per_node_;
  std::vector<int32_t> row_;
  std::vector<double> slot_load_;   ///< [points * slots]
  std::vector<double> shard_load_;  ///< [points * shards]
  std::vector<uint8_t> holds_;      ///< [shards * experts] 1 when the row places it there.
  std::vector<uint8_t> was_;        ///< [shards * experts] the current layout's; empty: none.
  int moved_ = 0;
  int max_moved_ = 0;
};

layer_polish::layer_polish(const layout& proposed, const std::vector<load_matrix>& trajectory,
                           int layer, const layout* current, const polish_terms& terms)
    : points_(static_cast<int>(trajectory.size())),
      experts_(proposed.experts()),
      shards_(proposed.shards()),
      per_shard_(proposed.slots_per_shard()),
      slots_(proposed.slots()),
      shards_per_node_(proposed.shards() / terms.nodes),
      row_(proposed.phy2log(layer)),
      slot_load_(static_cast<size_t>(points_) * slots_),
      shard_load_(static_cast<size_t>(points_) * shards_, 0.0),
      holds_(static_cast<size_t>(shards_) * experts_, 0) {
  for (int slot = 0; slot < slots_; ++slot) {
    const int32_t e = row_[slot];
    holds_[index(slot / per_shard_, e)] = 1;
    for (int p = 0; p < points_; ++p) {
      const double l = trajectory[p][layer][e] / proposed.replica_count(layer, e);
      slot_load_[p * slots_ + slot] = l;
      shard_load(p, slot / per_shard_) += l;
    }
  }
  if (!current) return;
  was_.assign(holds_.size(), 0);
  for (int slot = 0; slot < slots_; ++slot)
    was_[index(slot / per_shard_, current->logical(layer, slot))] = 1;
  for (int slot = 0; slot < slots_; ++slot)
    moved_ += was_there(slot / per_shard_, row_[slot]) ? 0 : 1;
  max_moved_ = moved_;
}

void layer_polish::consider_swaps_from(int a, const std::vector<top_three>& top,
                                       swap_choice& best) const {
  const int node_first = a / shards_per_node_ * shards_per_node_;
  for (int ia = a * per_shard_; ia < (a + 1) * per_shard_; ++ia) {
    const int32_t x = row_[ia];
    for (int b = node_first; b < node_first + shards_per_node_; ++b) {
      if (b == a) continue;
      for (int ib = b * per_shard_; ib < (b + 1) * per_shard_; ++ib) {
        const int32_t y = row_[ib];
        if (x == y || holds(a, y) || holds(b, x)) continue;
        const int moves = (was_there(a, y) ? 0 : 1) + (was_there(b, x) ? 0 : 1) -
                          (was_there(a, x) ? 0 : 1) - (was_there(b, y) ? 0 : 1);
        if (moves > 0 && moved_ + moves > max_moved_) continue;
        double objective = 0;
        for (int p = 0; p < points_; ++p) {
          const double delta = slot_load(p, ib) - slot_load(p, ia);
          objective += std::max(
              {top[p].busiest_besides(a, b), shard_load(p, a) + delta, shard_load(p, b) - delta});
        }
        if (objective < best.objective) best = {ia, ib, objective};
      }
    }
  }
}

bool layer_polish::improve_once() {
  std::vector<top_three> top(points_);
  double objective = 0;
  for (int p = 0; p < points_; ++p) {
    for (int s = 0; s < shards_; ++s)
      top[p].offer(s, shard_load(p, s));
    objective += top[p].load[0];
  }
  // Only a swap off a shard that is the busiest at some point can lower the sum.
  swap_choice best;
  best.objective = objective * (1 - 1e-9);
  std::vector<int> busiest;
  for (const top_three& t : top) {
    if (std::find(busiest.begin(), busiest.end(), t.shard[0]) == busiest.end()) {
      busiest.push_back(t.shard[0]);
    }
  }
  for (int a : busiest)
    consider_swaps_from(a, top, best);
  if (best.slot_a < 0) return false;
  apply(best.slot_a, best.slot_b);
  return true;
}

void layer_polish::apply(int slot_a, int slot_b) {
  const int a = slot_a / per_shard_;
  const int b = slot_b / per_shard_;
  const int32_t x = row_[slot_a];
  const int32_t y = row_[slot_b];
  moved_ += (was_there(a, y) ? 0 : 1) + (was_there(b, x) ? 0 : 1) - (was_there(a, x) ? 0 : 1) -
            (was_there(b, y) ? 0 : 1);
  holds_[index(a, x)] = 0;
  holds_[index(b, y)] = 0;
  holds_[index(a, y)] = 1;
  holds_[index(b, x)] = 1;
  std::swap(row_[slot_a], row_[slot_b]);
  for (int p = 0; p < points_; ++p) {
    const double delta = slot_load_[p * slots_ + slot_b] - slot_load_[p * slots_ + slot_a];
    shard_load(p, a) += delta;
    shard_load(p, b) -= delta;
    std::swap(slot_load_[p * slots_ + slot_a], slot_load_[p * slots_ + slot_b]);
  }
  assert(moved_ <= max_moved_);
}

status validate_trajectory(const layout& proposed, const std::vector<load_matrix>& trajectory,
                           const layout* current, const polish_terms& terms) {
  for (const load_matrix& point : trajectory) {
    if (status s = validate_load_matrix(point); !s) return s;
    if (static_cast<int>(point.size()) != proposed.layers() ||
        static_cast<int>(point.front().size()) != proposed.experts()) {
      return error(errc::invalid_argument,
                   "a trajectory point has " + std::to_string(point.size()) + " layers of " +
                       std::to_string(point.front().size()) + " experts; the layout has " +
                       std::to_string(proposed.layers()) + " of " +
                       std::to_string(proposed.experts()));
    }
  }
  if (current && current->shape() != proposed.shape()) {
    return error(errc::invalid_argument, "the current layout's shape is not the proposal's");
  }
  if (terms.nodes <= 0 || proposed.shards() % terms.nodes != 0) {
    return error(errc::invalid_argument, std::to_string(terms.nodes) + " nodes do not divide " +
                                             std::to_string(proposed.shards()) + " shards");
  }
  if (!(terms.max_moved_fraction > 0 && terms.max_moved_fraction <= 1)) {
    return error(errc::invalid_argument, "max_moved_fraction must be in (0, 1]");
  }
  return ok_status();
}

}  // namespace

result<layout> polish_for_trajectory(const layout& proposed,
                                     const std::vector<load_matrix>& trajectory,
                                     const layout* current, const polish_terms& terms) {
  if (status s = validate_trajectory(proposed, trajectory, current, terms); !s) return s.err();
  if (trajectory.empty()) return proposed;
  // The budget holds per layer and for the plan as a whole, so that a layer whose new replica
  // counts alone move more than its share leaves the others less.
  const int layer_budget = static_cast<int>(terms.max_moved_fraction * proposed.slots());
  long long headroom = 0;
  if (current) {
    headroom =
        static_cast<long long>(terms.max_moved_fraction * proposed.slots() * proposed.layers()) -
        moved_slots(*current, proposed);
  }
  std::vector<std::vector<int32_t>> phy2log;
  phy2log.reserve(proposed.layers());
  for (int layer = 0; layer < proposed.layers(); ++layer) {
    layer_polish polish(proposed, trajectory, layer, current, terms);
    const int planned = polish.moved();
    polish.allow_moves(planned + static_cast<int>(std::clamp<long long>(
                                     headroom, 0, std::max(0, layer_budget - planned))));
    for (int swaps = 0; swaps < terms.max_swaps_per_layer && polish.improve_once(); ++swaps) {
    }
    headroom -= polish.moved() - planned;
    phy2log.push_back(polish.take_row());
  }
  return layout::from_phy2log(proposed.shape(), std::move(phy2log), proposed.epoch());
}

result<layout> plan_for_trajectory(const load_matrix& planning,
                                   const std::vector<load_matrix>& trajectory,
                                   const planner_options& options, const layout* current) {
  auto planned = plan_layout(planning, options, current);
  if (!planned || trajectory.empty()) return planned;
  polish_terms terms;
  terms.nodes = options.nodes;
  terms.max_moved_fraction = options.max_moved_fraction;
  return polish_for_trajectory(*planned, trajectory, current, terms);
}

double trajectory_max_over_mean(const layout& l, const std::vector<load_matrix>& trajectory,
                                int layer) {
  double busiest = 0;
  double mean = 0;
  for (const load_matrix& point : trajectory) {
    const std::vector<double> shard = shard_loads(l, point, layer);
    double total = 0;
    for (double x : shard)
      total += x;
    busiest += *std::max_element(shard.begin(), shard.end());
    mean += total / l.shards();
  }
  return mean > 0 ? busiest / mean : 1.0;
}

}  // namespace brigade::eplb

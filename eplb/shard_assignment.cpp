#include "eplb/shard_assignment.hpp"

#include <algorithm>
#include <cassert>

namespace brigade::eplb {

shard_assignment::shard_assignment(int experts, int shards, int slots_per_shard, int nodes)
    : experts_(experts),
      shards_(shards),
      slots_per_shard_(slots_per_shard),
      nodes_(nodes),
      shards_per_node_(shards / nodes),
      slot_expert_(static_cast<size_t>(shards) * slots_per_shard, -1),
      shard_load_(shards, 0.0),
      filled_(shards, 0),
      present_(static_cast<size_t>(shards) * experts, 0),
      node_replicas_(static_cast<size_t>(nodes) * experts, 0),
      replica_count_(experts, 1),
      node_cap_(experts, 1),
      replica_load_(experts, 0.0) {
  assert(nodes > 0 && shards % nodes == 0);
}

void shard_assignment::set_replicas(const double* expert_load, const int32_t* replica_count) {
  for (int e = 0; e < experts_; ++e) {
    assert(replica_count[e] >= 1);
    replica_count_[e] = replica_count[e];
    node_cap_[e] = (replica_count[e] + nodes_ - 1) / nodes_;
    replica_load_[e] = expert_load[e] / replica_count[e];
  }
  for (int s = 0; s < shards_; ++s) {
    double sum = 0;
    for (int i = 0; i < slots_per_shard_; ++i) {
      const int32_t e = slot_expert_[slot(s, i)];
      if (e >= 0) sum += replica_load_[e];
    }
    shard_load_[s] = sum;
  }
}

void shard_assignment::clear() {
  std::fill(slot_expert_.begin(), slot_expert_.end(), -1);
  std::fill(shard_load_.begin(), shard_load_.end(), 0.0);
  std::fill(filled_.begin(), filled_.end(), 0);
  std::fill(present_.begin(), present_.end(), 0);
  std::fill(node_replicas_.begin(), node_replicas_.end(), 0);
}

void shard_assignment::assign_from(const int32_t* phy2log) {
  clear();
  for (int s = 0; s < shards_; ++s) {
    for (int i = 0; i < slots_per_shard_; ++i)
      add(s, i, phy2log[slot(s, i)]);
  }
}

bool shard_assignment::node_allows(int node, int expert) const {
  return nodes_ == 1 || node_replicas_[node_index(node, expert)] < node_cap_[expert];
}

bool shard_assignment::fits(int shard, int expert) const {
  return filled_[shard] < slots_per_shard_ && !holds(shard, expert) &&
         node_allows(node_of(shard), expert);
}

bool shard_assignment::can_swap(int shard_a, int local_a, int shard_b, int local_b) const {
  const int32_t x = slot_expert_[slot(shard_a, local_a)];
  const int32_t y = slot_expert_[slot(shard_b, local_b)];
  if (x == y || shard_a == shard_b) return false;
  if ((y >= 0 && holds(shard_a, y)) || (x >= 0 && holds(shard_b, x))) return false;
  const int node_a = node_of(shard_a);
  const int node_b = node_of(shard_b);
  if (node_a == node_b) return true;
  return (x < 0 || node_allows(node_b, x)) && (y < 0 || node_allows(node_a, y));
}

bool shard_assignment::node_caps_hold() const {
  for (int n = 0; n < nodes_; ++n) {
    for (int e = 0; e < experts_; ++e) {
      if (node_replicas_[node_index(n, e)] > node_cap_[e]) return false;
    }
  }
  return true;
}

void shard_assignment::add(int shard, int local, int expert) {
  assert(slot_expert_[slot(shard, local)] < 0 && expert >= 0 && !holds(shard, expert));
  slot_expert_[slot(shard, local)] = expert;
  shard_load_[shard] += replica_load_[expert];
  ++filled_[shard];
  present_[presence(shard, expert)] = 1;
  ++node_replicas_[node_index(node_of(shard), expert)];
}

void shard_assignment::remove(int shard, int local) {
  const int32_t expert = slot_expert_[slot(shard, local)];
  assert(expert >= 0);
  slot_expert_[slot(shard, local)] = -1;
  shard_load_[shard] -= replica_load_[expert];
  --filled_[shard];
  present_[presence(shard, expert)] = 0;
  --node_replicas_[node_index(node_of(shard), expert)];
}

void shard_assignment::place(int shard, int expert) {
  assert(fits(shard, expert));
  for (int i = 0; i < slots_per_shard_; ++i) {
    if (slot_expert_[slot(shard, i)] < 0) return add(shard, i, expert);
  }
}

void shard_assignment::swap(int shard_a, int local_a, int shard_b, int local_b) {
  assert(can_swap(shard_a, local_a, shard_b, local_b));
  const int32_t x = slot_expert_[slot(shard_a, local_a)];
  const int32_t y = slot_expert_[slot(shard_b, local_b)];
  if (x >= 0) remove(shard_a, local_a);
  if (y >= 0) remove(shard_b, local_b);
  if (y >= 0) add(shard_a, local_a, y);
  if (x >= 0) add(shard_b, local_b, x);
}

int shard_assignment::busiest_shard() const {
  return static_cast<int>(std::max_element(shard_load_.begin(), shard_load_.end()) -
                          shard_load_.begin());
}

double shard_assignment::total_load() const {
  double sum = 0;
  for (double l : shard_load_)
    sum += l;
  return sum;
}

}  // namespace brigade::eplb

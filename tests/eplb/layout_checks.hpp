// Checks of a layout's invariants that read the maps directly rather than trusting the layout's
// own validation, so the tests catch a planner and a validator that are wrong together.
#pragma once

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "eplb/layout.hpp"

namespace brigade::eplb::testing {

inline void require_layout_invariants(const layout& l, const std::string& context) {
  INFO(context);
  const int k = l.slots_per_shard();
  for (int layer = 0; layer < l.layers(); ++layer) {
    const auto& phy2log = l.phy2log(layer);
    REQUIRE(static_cast<int>(phy2log.size()) == l.slots());
    std::vector<int> counted(l.experts(), 0);
    for (int shard = 0; shard < l.shards(); ++shard) {
      std::set<int> on_shard;
      for (int i = 0; i < k; ++i) {
        const int e = phy2log[shard * k + i];
        REQUIRE(e >= 0);  // every slot filled
        REQUIRE(e < l.experts());
        REQUIRE(on_shard.insert(e).second);  // no two replicas of one expert on one shard
        ++counted[e];
      }
    }
    int listed = 0;
    for (int e = 0; e < l.experts(); ++e) {
      REQUIRE(counted[e] >= 1);  // every logical expert has a replica
      REQUIRE(l.replica_count(layer, e) == counted[e]);
      const slot_list slots = l.log2phy(layer, e);
      REQUIRE(slots.size() == counted[e]);
      for (int i = 0; i < slots.size(); ++i) {
        REQUIRE(phy2log[slots[i]] == e);  // both maps agree
        if (i > 0) REQUIRE(slots[i - 1] < slots[i]);
      }
      listed += slots.size();
    }
    REQUIRE(listed == l.slots());
  }
}

/// With node grouping, no node holds more than ceil(r / nodes) of an expert's r replicas.
inline void require_node_spread(const layout& l, int nodes, const std::string& context) {
  INFO(context);
  const int shards_per_node = l.shards() / nodes;
  for (int layer = 0; layer < l.layers(); ++layer) {
    for (int e = 0; e < l.experts(); ++e) {
      std::vector<int> per_node(nodes, 0);
      for (int32_t slot : l.log2phy(layer, e))
        ++per_node[l.shard_of(slot) / shards_per_node];
      const int cap = (l.replica_count(layer, e) + nodes - 1) / nodes;
      for (int n = 0; n < nodes; ++n)
        REQUIRE(per_node[n] <= cap);
    }
  }
}

}  // namespace brigade::eplb::testing

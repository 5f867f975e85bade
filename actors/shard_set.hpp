// The expert shards a worker sends activations to, with the layout that maps experts to them
// (eplb::layout, the one layout type: over the model's MoE layers, in order).
#pragma once

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/expert_shard.hpp"
#include "common/result.hpp"
#include "eplb/layout.hpp"
#include "model/config.hpp"

namespace brigade::eplb {

// A layout travels as its shape, epoch and phy2log. One from a peer is rebuilt through
// from_phy2log, which checks every invariant before anything indexes it: a bad one fails
// deserialization, and CAF drops the message before any handler runs.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, layout& x) {
  layout_shape shape = x.shape();
  uint64_t epoch = x.epoch();
  std::vector<std::vector<int32_t>> phy2log = x.phy2log();
  auto rebuild = [&]() -> caf::error {
    if (shape.layers == 0 && phy2log.empty()) {
      x = layout{};
      return caf::none;
    }
    auto built = layout::from_phy2log(shape, std::move(phy2log), epoch);
    if (!built) {
      return caf::make_error(caf::sec::invalid_argument, "expert layout: " + built.err().message);
    }
    x = std::move(built.value());
    return caf::none;
  };
  return f(caf::meta::type_name("expert_layout"), shape.layers, shape.experts, shape.shards,
           shape.slots_per_shard, epoch, phy2log, caf::meta::load_callback(rebuild));
}

}  // namespace brigade::eplb

namespace brigade::actors {

/// Where workers report the layout epoch they route with (the supervisor).
using layout_ack_actor = caf::typed_actor<caf::reacts_to<switched_atom, std::string, uint64_t>>;

struct shard_set {
  std::vector<expert_shard_actor> shards;  ///< Indexed like the layout's shards.
  eplb::layout layout;
  /// Grows with every set the supervisor sends out (a shard replaced, a layout switched). A
  /// worker whose call failed on an older set than the one it now holds resends at once
  /// instead of waiting for a newer one that may never come.
  uint64_t version = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_set& x) {
  return f(caf::meta::type_name("shard_set"), x.shards, x.layout, x.version);
}

/// OK when `layout` is one of `model`'s: a layer per MoE layer, the model's experts.
status check_layout(const eplb::layout& layout, const model::model_config& model);

/// OK when the set's layout fits `model` and the set names a shard for each of the layout's.
status check_shards(const shard_set& set, const model::model_config& model);

/// Slots per shard when a manifest leaves it 0: a quarter more slots than `experts` over
/// `shards` shards, rounded up, at most `experts` (a shard holds one copy of an expert).
int default_slots_per_shard(int experts, int shards);

/// Experts in order, slot by slot; spare slots hold replicas of experts 0, 1, ... placed so that
/// no shard holds two copies of one expert. slots_per_shard 0: default_slots_per_shard.
result<eplb::layout> initial_layout(const model::model_config& model, int shards,
                                    int slots_per_shard);

/// What every worker (prefill or decode) accepts from its supervisor: the shards and layout to
/// route with from its next step on.
using shard_user_actor = caf::typed_actor<caf::reacts_to<shards_atom, shard_set>>;

}  // namespace brigade::actors

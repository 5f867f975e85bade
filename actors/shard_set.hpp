// The expert shards a worker sends activations to, with the layout that maps experts to them.
#pragma once

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/typed_actor.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/expert_layout.hpp"
#include "actors/expert_shard.hpp"

namespace brigade::actors {

/// Where workers report the layout epoch they route with (the supervisor).
using layout_ack_actor = caf::typed_actor<caf::reacts_to<switched_atom, std::string, uint64_t>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_layout& x) {
  // log2phy is derived: rebuilt after loading, never sent. A layout from a peer is checked first,
  // since indexing trusts its entries: a bad one fails deserialization and CAF drops the message.
  auto rebuild = [&]() -> caf::error {
    if (status ok = x.check(); !ok)
      return caf::make_error(caf::sec::invalid_argument, "expert layout: " + ok.err().message);
    x.index();
    return caf::none;
  };
  return f(caf::meta::type_name("expert_layout"), x.epoch, x.shards, x.slots_per_shard, x.experts,
           x.phy2log, caf::meta::load_callback(rebuild));
}

struct shard_set {
  std::vector<expert_shard_actor> shards;  ///< Indexed like the layout's shards.
  expert_layout layout;
  /// Grows with every set the supervisor sends out (a shard replaced, a layout switched). A
  /// worker whose call failed on an older set than the one it now holds resends at once
  /// instead of waiting for a newer one that may never come.
  uint64_t version = 0;
};

/// OK when the set's layout fits `model` and the set names a shard for each of the layout's.
inline status check_shards(const shard_set& set, const model::model_config& model) {
  if (status fits = set.layout.fits(model); !fits) return fits;
  if (set.shards.size() == static_cast<size_t>(std::max(0, set.layout.shards))) return ok_status();
  return error(errc::invalid_argument, "the shard set names " + std::to_string(set.shards.size()) +
                                           " shards for a layout of " +
                                           std::to_string(set.layout.shards));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_set& x) {
  return f(caf::meta::type_name("shard_set"), x.shards, x.layout, x.version);
}

}  // namespace brigade::actors

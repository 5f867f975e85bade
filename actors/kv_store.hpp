// KV store: the host-memory and SSD tiers of the prefix cache (kvcache::tiered_store), one per
// node, shared by the node's prefill workers. Blocks a worker's pool evicts are demoted here; a
// worker whose pool misses a prompt's next blocks looks them up here before computing them.
//
//   spawned --(tiers open)--> serving --(killed)--> gone; the supervisor spawns a new generation,
//      \--(SSD directory busy: retry, then)--> serving without tiers (every lookup misses)
//
// The SSD tier outlives the actor: a new generation indexes the directory's block files again
// (the host tier starts empty). No message waits on the disk: a lookup that needs blocks from
// SSD is answered when their promotion (the tiered store's background thread) is done, while the
// store goes on serving other messages, and the asking worker keeps stepping its other jobs.
#pragma once

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/payloads.hpp"
#include "kvcache/clock.hpp"
#include "kvcache/retention.hpp"
#include "kvcache/tiered_store.hpp"

namespace brigade::kvcache {

// Found by argument-dependent lookup when a prefill worker's settings go to another node.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scenario_retention& x) {
  return f(caf::meta::type_name("scenario_retention"), x.name, x.retention_s);
}

// Found by argument-dependent lookup when a KV store's status goes to the HTTP edge.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tier_stats& x) {
  return f(caf::meta::type_name("tier_stats"), x.blocks, x.bytes, x.budget_bytes, x.hits, x.misses,
           x.insertions, x.evictions, x.expirations, x.corrupt_blocks, x.disk_full_events,
           x.io_errors, x.blocks_by_scenario);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_stats& x) {
  return f(caf::meta::type_name("store_stats"), x.host, x.ssd, x.has_ssd, x.lookup_host_hits,
           x.lookup_ssd_hits, x.lookup_misses, x.demotions, x.demotions_dropped, x.promotions,
           x.promotions_failed, x.promotions_refused, x.disk_full_pauses, x.write_error_pauses,
           x.demotion_paused, x.pending_demotions, x.queue_depth);
}

}  // namespace brigade::kvcache

namespace brigade::actors {

/// Blocks leaving a worker's pool: keep them in the store's tiers.
struct kv_demotion {
  std::vector<kvcache::block_hash> hashes;  ///< Chain hash of each block.
  std::vector<uint16_t> scenarios;          ///< Retention scenario id of each block.
  std::vector<uint8_t> bytes;               ///< The blocks one after the other, in payload layout.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_demotion& x) {
  return f(caf::meta::type_name("kv_demotion"), x.hashes, x.scenarios, x.bytes);
}

/// Which leading blocks of `hashes` the store holds; a use under `scenario`.
struct kv_lookup {
  std::vector<kvcache::block_hash> hashes;
  uint16_t scenario = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_lookup& x) {
  return f(caf::meta::type_name("kv_lookup"), x.hashes, x.scenario);
}

/// The leading blocks found, in chain order, and which tier each came from.
struct kv_found {
  int32_t blocks = 0;
  int32_t host_blocks = 0;  ///< Blocks that were in host memory.
  int32_t ssd_blocks = 0;   ///< Blocks promoted from SSD for this lookup.
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_found& x) {
  return f(caf::meta::type_name("kv_found"), x.blocks, x.host_blocks, x.ssd_blocks, x.bytes);
}

/// A KV store's status: its lookups and demotions, and its tiers' figures once they are open.
struct kv_store_status {
  role_status load;
  int64_t lookups = 0;
  int64_t demotion_batches = 0;
  bool open = false;       ///< The tiers are open (see open_error otherwise).
  std::string open_error;  ///< Why they are not (an SSD directory another store holds, ...).
  kvcache::store_stats store;
  /// The bytes of one block of the model and the tokens it covers: block_bytes / block_tokens
  /// is what a cached token costs in every tier (half as much for MLA, whose rows serve as keys
  /// and values).
  uint64_t block_bytes = 0;
  int32_t block_tokens = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_store_status& x) {
  return f(caf::meta::type_name("kv_store_status"), x.load, x.lookups, x.demotion_batches, x.open,
           x.open_error, x.store, x.block_bytes, x.block_tokens);
}

/// What a KV store accepts: demotions and lookups from the prefill workers of its node.
using kv_store_actor =
    caf::typed_actor<caf::reacts_to<kv_demotion>, caf::replies_to<kv_lookup>::with<kv_found>,
                     caf::replies_to<status_atom>::with<kv_store_status>>;

struct kv_store_config {
  std::string name;  ///< "kv_store-0"
  /// The checkpoint's content id (model/checkpoint_identity.hpp): blocks of other weights are
  /// never served.
  std::string model_id;
  int layers = 0;
  int block_tokens = 16;
  int kv_heads = 0;
  int head_dim = 0;
  bool values_alias_keys = false;  ///< The model caches one row as key and value (MLA).
  /// The workers' KV element type, "f32" or "bf16": blocks arrive and leave as float32, and the
  /// tiers keep them in this type (a bf16 block is half the bytes, and part of its identity).
  std::string kv_dtype = "f32";
  /// The deployment's kernel numerics ("f32", "bf16-dot": gpu/cpu/kernel_path.hpp): blocks
  /// computed under another class would change results, so it is part of their identity too.
  std::string numerics = "f32";
  uint64_t host_bytes = 0;
  uint64_t ssd_bytes = 0;
  std::string ssd_dir;  ///< Empty: no SSD tier.
  /// block_hasher::key_id() of the deployment's block-hash key (not the key): the SSD tier drops
  /// files written under another.
  uint64_t hash_key_id = 0;
  /// Scenario names and retention periods, in scenario id order (chat and agent first).
  std::vector<kvcache::scenario_retention> scenarios;
  std::shared_ptr<const kvcache::clock> clock;
  /// How long a lookup may wait for its SSD promotions before it is answered with what is in
  /// host memory.
  std::chrono::milliseconds promotion_timeout{2000};
};

// A KV store spawned on another node gets everything but the clock (it uses the system's).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_store_config& x) {
  return f(caf::meta::type_name("kv_store_config"), x.name, x.model_id, x.layers, x.block_tokens,
           x.kv_heads, x.head_dim, x.values_alias_keys, x.kv_dtype, x.numerics, x.host_bytes,
           x.ssd_bytes, x.ssd_dir, x.hash_key_id, x.scenarios, x.promotion_timeout);
}

/// A null clock means the system clock.
kv_store_actor spawn_kv_store(caf::actor_system& sys, kv_store_config config);

/// Registers the types above with an actor system's config.
void register_kv_store_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors

// The supervisor's state, shared by its two halves: supervision (supervisor.cpp) and expert
// migrations (supervisor_migration.cpp). Private to those files.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "actors/prefill_worker.hpp"
#include "actors/rebalancer.hpp"
#include "actors/shard_set.hpp"
#include "actors/supervisor.hpp"

namespace brigade::actors {

using supervisor_clock = std::chrono::steady_clock;

struct supervised_child {
  std::string name;
  std::string role;
  int index = 0;
  std::string node = "local";  ///< Where it runs (or is being spawned).
  caf::actor handle;
  bool alive = false;
  bool spawning = false;
  bool given_up = false;
  std::deque<supervisor_clock::time_point> recent_restarts;
};

/// A migration to a new layout, from preparation to the last worker's switch.
struct migration {
  enum class phase { preparing, switching };
  phase at = phase::preparing;
  expert_layout target;
  supervisor_clock::time_point started;
  std::set<int> prepared;          // shards that hold the target epoch
  std::set<std::string> switched;  // workers routing with it
  int moved_slots = 0;
};

struct supervisor_state {
  std::shared_ptr<const model_context> ctx;
  supervisor_config config;
  registry_actor registry;
  router_actor router;
  std::map<std::string, supervised_child> children;
  shard_set shards;  // what workers get: the live shards and the layout they route with
  std::unique_ptr<rebalancer> balance;
  std::unique_ptr<migration> moving;
  bool shutting_down = false;
  bool workers_started = false;  // workers spawn once every shard is up
  std::set<std::string> dead_nodes;
  int64_t restarts = 0;
  static inline const char* name = "supervisor";
};

using supervisor_pointer = supervisor_actor::stateful_pointer<supervisor_state>;

/// The slots shard `shard` holds under `layout`.
shard_plan plan_for_shard(const expert_layout& layout, int shard);
/// Sends the current shard set to every live worker.
void broadcast_shards(supervisor_pointer self);

// Migrations (supervisor_migration.cpp).
void on_load_sample(supervisor_pointer self, const load_sample& sample);
void on_switched(supervisor_pointer self, const std::string& worker, uint64_t epoch);
/// False while a migration runs or the topology stops: start_migration would refuse.
bool may_start_migration(const supervisor_state& st);
bool start_migration(supervisor_pointer self, expert_layout target);
/// A failure during a migration returns everyone to the last complete layout.
void roll_back(supervisor_pointer self, const std::string& why);
std::string migration_json(const supervisor_state& st);

// The prefix cache's roles (supervisor_cache.cpp).
/// The settings of the KV store child `c` (one per node that runs prefill workers).
kv_store_config kv_store_config_for(supervisor_pointer self, const supervised_child& c);
/// Gives a (re)started KV store's handle to every live prefill worker on its node.
void announce_kv_store(supervisor_pointer self, const supervised_child& store);
/// Fills a prefill worker's cache settings from the manifest and the cache options, with the KV
/// store of its own node: block bytes never leave the node.
void configure_prefill_cache(supervisor_pointer self, prefill_worker_config& cfg,
                             const supervised_child& c);

}  // namespace brigade::actors

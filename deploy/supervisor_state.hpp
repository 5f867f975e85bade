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
#include "actors/role_kind.hpp"
#include "actors/role_spawner.hpp"
#include "actors/shard_set.hpp"
#include "deploy/rebalancer.hpp"
#include "deploy/supervisor.hpp"

namespace brigade::deploy {

// The composition layer speaks the roles' vocabulary (and the node agents').
using namespace brigade::actors;
using namespace brigade::cluster;

using supervisor_clock = std::chrono::steady_clock;

struct supervised_child {
  std::string name;
  role_kind role = role_kind::expert_shard;
  int index = 0;
  std::string node = "local";  ///< Where it runs (or is being spawned).
  std::string home = "local";  ///< Where the placement puts it; it returns there when it can.
  caf::actor handle;
  bool alive = false;
  bool spawning = false;
  bool given_up = false;
  bool awaiting_node = false;  ///< Its node went out of contact: adopted back or moved later.
  bool moving_home = false;    ///< Stopped on purpose to run again on its home node.
  uint64_t attempt = 0;        ///< Counts spawns: the answer to an abandoned one is refused.
  std::deque<supervisor_clock::time_point> recent_restarts;
};

/// What the supervisor knows of a node's contact.
struct node_view {
  bool lost = false;         ///< Its connection closed and it has not answered since.
  bool window_open = false;  ///< Lost, and its roles still wait for it (rejoin window).
  bool suspected = false;    ///< Heartbeats late: no new roles go there.
  uint64_t loss = 0;         ///< Counts losses; names the rejoin timer of the current one.
};

/// A migration to a new layout, from preparation to the last worker's switch.
struct migration {
  enum class phase { preparing, switching };
  phase at = phase::preparing;
  eplb::layout target;
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
  std::map<std::string, node_view> nodes;
  int64_t restarts = 0;
  static inline const char* name = "supervisor";
};

// Private: its own timers, a child's restart after its back-off and the end of a lost node's
// rejoin window (the number names which loss).
using supervisor_impl =
    supervisor_actor::extend<caf::reacts_to<restart_atom, std::string>,
                             caf::reacts_to<rejoin_atom, std::string, uint64_t>>;
using supervisor_pointer = supervisor_impl::stateful_pointer<supervisor_state>;

/// The slots shard `shard` holds under `layout`, named by model layer (`moe_layers`: the
/// model's MoE layers, in the layout's order).
shard_plan plan_for_shard(const eplb::layout& layout, const std::vector<int>& moe_layers,
                          int shard);
/// Sends the current shard set to every live worker.
void broadcast_shards(supervisor_pointer self);
/// Spawns (or re-spawns) one child, here or through its node's agent; a child whose node is
/// out of contact within its rejoin window waits for it instead.
void spawn_child(supervisor_pointer self, supervised_child& c);
/// A child is up: spawned, or adopted back from a node that came back. Monitors it and tells
/// whoever needs its handle.
void child_up(supervisor_pointer self, const std::string& name, caf::actor handle,
              bool adopted = false, uint64_t attempt = 0);
/// Records a cluster event (node and role faults and recoveries) for /v1/events.
void cluster_event(supervisor_pointer self, const std::string& kind, const std::string& node,
                   const std::string& actor, const std::string& detail);

// Nodes going out of contact and coming back (supervisor_nodes.cpp).
/// A child's node stopped answering (its connection closed): the child waits for the node.
void child_unreachable(supervisor_pointer self, supervised_child& c, const std::string& why);
/// A node's connection closed; `gone` when its address refuses connections (nothing to wait for).
void on_node_lost(supervisor_pointer self, const std::string& node, const std::string& why,
                  bool gone);
void on_node_back(supervisor_pointer self, const std::string& node, node_agent_actor agent,
                  std::vector<held_role> held);
void on_rejoin_window_over(supervisor_pointer self, const std::string& node, uint64_t loss);
void on_suspect(supervisor_pointer self, const std::string& node, bool suspected);
/// A node announced it is stopping: no new roles go there, its roles move as they stop.
void on_node_leaving(supervisor_pointer self, const std::string& node);
/// The live node for a child whose node is lost: not suspected if possible, fewest children.
std::string replacement_node(const supervisor_state& st);

// Migrations (supervisor_migration.cpp).
void on_load_sample(supervisor_pointer self, const load_sample& sample);
void on_switched(supervisor_pointer self, const std::string& worker, uint64_t epoch);
/// False while a migration runs or the topology stops: start_migration would refuse.
bool may_start_migration(const supervisor_state& st);
bool start_migration(supervisor_pointer self, eplb::layout target);
/// A failure during a migration returns everyone to the last complete layout.
void roll_back(supervisor_pointer self, const std::string& why);
migration_progress migration_of(const supervisor_state& st);

// The prefix cache's roles (supervisor_cache.cpp).
/// The settings of the KV store child `c` (one per node that runs prefill workers).
kv_store_config kv_store_config_for(supervisor_pointer self, const supervised_child& c);
/// Gives a (re)started KV store's handle to every live prefill worker on its node.
void announce_kv_store(supervisor_pointer self, const supervised_child& store);
/// Fills a prefill worker's cache settings from the manifest and the cache clock, with the KV
/// store of its own node: block bytes never leave the node.
void configure_prefill_cache(supervisor_pointer self, prefill_worker_config& cfg,
                             const supervised_child& c);

}  // namespace brigade::deploy

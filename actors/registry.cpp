#include "actors/registry.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <map>

namespace brigade::actors {
namespace {

struct registry_state {
  uint64_t version = 0;
  std::map<std::string, actor_entry> entries;
  std::map<std::string, node_entry> nodes;
  std::vector<registry_listener_actor> subscribers;
  static inline const char* name = "registry";
};

using registry_pointer = registry_actor::stateful_pointer<registry_state>;

void publish(registry_pointer self, const std::string& kind, const actor_entry& entry) {
  registry_event ev{self->state.version, kind, entry};
  for (const auto& s : self->state.subscribers)
    caf::anon_send(s, ev);
}

}  // namespace

static registry_actor::behavior_type registry_behavior(registry_pointer self) {
  return {
      [=](register_atom, actor_entry entry) -> uint64_t {
        auto& st = self->state;
        auto it = st.entries.find(entry.name);
        const bool restart = it != st.entries.end();
        if (restart) {
          entry.restarts = it->second.restarts + 1;
          entry.generation = it->second.generation + 1;
          entry.death_cause = it->second.death_cause;
        } else if (entry.generation == 0) {
          entry.generation = 1;
        }
        entry.alive = true;
        st.entries[entry.name] = entry;
        ++st.version;
        publish(self, restart ? "restarted" : "spawned", entry);
        return st.version;
      },
      [=](death_atom, const std::string& name, const std::string& cause, bool final) -> uint64_t {
        auto& st = self->state;
        auto& entry = st.entries[name];
        if (entry.name.empty()) entry.name = name;
        entry.alive = false;
        entry.death_cause = cause;
        ++st.version;
        publish(self, final ? "gave_up" : "died", entry);
        return st.version;
      },
      [=](adopt_atom, const std::string& name, const std::string& node) -> uint64_t {
        auto& st = self->state;
        auto& entry = st.entries[name];
        if (entry.name.empty()) entry.name = name;
        entry.alive = true;
        entry.node = node;
        ++st.version;
        publish(self, "adopted", entry);
        return st.version;
      },
      [=](node_atom, node_entry& node) -> uint64_t {
        auto& st = self->state;
        st.nodes[node.name] = std::move(node);
        return ++st.version;
      },
      [=](snapshot_atom) {
        registry_snapshot snap;
        snap.version = self->state.version;
        for (const auto& [name, entry] : self->state.entries)
          snap.actors.push_back(entry);
        for (const auto& [name, node] : self->state.nodes)
          snap.nodes.push_back(node);
        return snap;
      },
      [=](subscribe_atom, registry_listener_actor& listener) {
        self->state.subscribers.push_back(std::move(listener));
      },
      [=](status_atom) {
        registry_status s;
        s.load.name = "registry";
        s.load.role = "registry";
        s.version = self->state.version;
        s.actors = self->state.entries.size();
        return s;
      },
  };
}

registry_actor spawn_registry(caf::actor_system& sys) {
  return sys.spawn(registry_behavior);
}

void register_registry_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<actor_entry>("brigade::actor_entry");
  cfg.add_message_type<registry_snapshot>("brigade::registry_snapshot");
  cfg.add_message_type<node_entry>("brigade::node_entry");
  cfg.add_message_type<std::vector<node_entry>>("std::vector<brigade::node_entry>");
  cfg.add_message_type<registry_event>("brigade::registry_event");
  cfg.add_message_type<registry_status>("brigade::registry_status");
  cfg.add_message_type<registry_actor>("brigade::registry_actor");
}

}  // namespace brigade::actors

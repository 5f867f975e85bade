#include "actors/registry.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

namespace brigade::actors {
namespace {

struct registry_state {
  uint64_t version = 0;
  std::map<std::string, actor_entry> entries;
  std::map<std::string, node_entry> nodes;
  std::vector<caf::actor> subscribers;
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
      [=](subscribe_atom, caf::actor subscriber) {
        self->state.subscribers.push_back(std::move(subscriber));
      },
      [=](status_atom) {
        role_status s;
        s.name = "registry";
        s.role = "registry";
        s.detail = "{\"version\": " + std::to_string(self->state.version) +
                   ", \"actors\": " + std::to_string(self->state.entries.size()) + "}";
        return s;
      },
  };
}

registry_actor spawn_registry(caf::actor_system& sys) {
  return sys.spawn(registry_behavior);
}

std::string to_json(const registry_snapshot& snapshot) {
  nlohmann::json j;
  j["version"] = snapshot.version;
  j["actors"] = nlohmann::json::array();
  for (const auto& e : snapshot.actors) {
    j["actors"].push_back({{"name", e.name},
                           {"role", e.role},
                           {"node", e.node},
                           {"generation", e.generation},
                           {"spawned_ms", e.spawned_ms},
                           {"alive", e.alive},
                           {"death_cause", e.death_cause.empty() ? nlohmann::json(nullptr)
                                                                 : nlohmann::json(e.death_cause)},
                           {"restarts", e.restarts}});
  }
  j["nodes"] = nlohmann::json::array();
  for (const auto& n : snapshot.nodes) {
    j["nodes"].push_back({{"name", n.name},
                          {"address", n.address},
                          {"state", n.state},
                          {"since_ms", n.since_ms},
                          {"joins", n.joins},
                          {"detail", n.detail}});
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace brigade::actors

// Supervisor: spawns the role actors of a topology, monitors every one of them and restarts a
// failed one by the manifest's policy (restart intensity and exponential backoff), telling the
// router and the workers about the replacement. It also injects faults on request.
//
// A supervised actor's life:
//
//   spawned --(dies)--> dead --(restarts within intensity: after backoff)--> spawned (gen + 1)
//                          \--(intensity exceeded)--> given up (registry: final)
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/expert_layout.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "deploy/manifest.hpp"

namespace brigade::actors {

using supervisor_actor =
    caf::typed_actor<caf::replies_to<kill_atom, std::string>::with<bool>,
                     caf::reacts_to<restart_atom, std::string>,
                     caf::replies_to<status_atom>::with<role_status>,
                     caf::replies_to<status_atom, bool>::with<std::vector<role_status>>>;

struct supervisor_config {
  deploy::manifest manifest;
  expert_layout layout;
};

/// Spawns the supervisor, which spawns the shards and workers at once and announces the workers
/// to `router`.
supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router);

}  // namespace brigade::actors

// The topology's typed status figures as the JSON the HTTP API serves (GET /v1/status,
// GET /v1/actors). JSON is made here, once, at the edge: the roles answer with typed structs.
#pragma once

#include <string>
#include <vector>

#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "deploy/membership.hpp"
#include "deploy/supervisor.hpp"

namespace brigade::deploy {

/// GET /v1/status: an array of {name, role, queue_depth, in_flight, last_step_ms, steps,
/// detail}, the router first, then every role the supervisor runs, then the nodes.
std::string statuses_json(const router_status* router, const role_statuses& roles,
                          const std::vector<node_status>& nodes);

/// GET /v1/actors: the registry's actors and nodes.
std::string registry_json(const registry_snapshot& snapshot);

}  // namespace brigade::deploy

// The atoms of brigade's actor messages (CAF 0.17: at most 10 characters each).
#pragma once

#include <caf/type_id.hpp>

CAF_ADD_ATOM(brigade, brigade::actors, status_atom, "status")
CAF_ADD_ATOM(brigade, brigade::actors, register_atom, "register")
CAF_ADD_ATOM(brigade, brigade::actors, death_atom, "death")
CAF_ADD_ATOM(brigade, brigade::actors, snapshot_atom, "snapshot")
CAF_ADD_ATOM(brigade, brigade::actors, subscribe_atom, "subscribe")
CAF_ADD_ATOM(brigade, brigade::actors, submit_atom, "submit")
CAF_ADD_ATOM(brigade, brigade::actors, cancel_atom, "cancel")
CAF_ADD_ATOM(brigade, brigade::actors, worker_atom, "worker")
CAF_ADD_ATOM(brigade, brigade::actors, shards_atom, "shards")
CAF_ADD_ATOM(brigade, brigade::actors, step_atom, "step")
CAF_ADD_ATOM(brigade, brigade::actors, kill_atom, "kill")
CAF_ADD_ATOM(brigade, brigade::actors, restart_atom, "restart")
CAF_ADD_ATOM(brigade, brigade::actors, tick_atom, "tick")
CAF_ADD_ATOM(brigade, brigade::actors, prepare_atom, "prepare")
CAF_ADD_ATOM(brigade, brigade::actors, release_atom, "release")
CAF_ADD_ATOM(brigade, brigade::actors, abort_atom, "abort")
CAF_ADD_ATOM(brigade, brigade::actors, loaded_atom, "loaded")
CAF_ADD_ATOM(brigade, brigade::actors, switched_atom, "switched")
CAF_ADD_ATOM(brigade, brigade::actors, replan_atom, "replan")
CAF_ADD_ATOM(brigade, brigade::actors, experts_atom, "experts")
CAF_ADD_ATOM(brigade, brigade::actors, events_atom, "events")
CAF_ADD_ATOM(brigade, brigade::actors, store_atom, "store")
CAF_ADD_ATOM(brigade, brigade::actors, weights_atom, "weights")

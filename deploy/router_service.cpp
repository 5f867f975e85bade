#include "deploy/router_service.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <optional>

#include "deploy/status_json.hpp"

namespace brigade::deploy {
namespace {

// How long introspection waits for an actor's answer.
constexpr std::chrono::seconds edge_timeout{10};

// The answer of `to` to `args`, or nothing after edge_timeout or an error.
template <class Reply, class Handle, class... Ts>
std::optional<Reply> ask(caf::actor_system& sys, const Handle& to, Ts&&... args) {
  caf::scoped_actor self{sys};
  std::optional<Reply> out;
  self->request(to, edge_timeout, std::forward<Ts>(args)...)
      .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error&) {});
  return out;
}

}  // namespace

router_service::router_service(caf::actor_system& sys, router_actor router, registry_actor registry,
                               supervisor_actor supervisor, membership_actor membership,
                               serve::service_info info)
    : sys_(sys),
      router_(std::move(router)),
      registry_(std::move(registry)),
      supervisor_(std::move(supervisor)),
      membership_(std::move(membership)),
      info_(std::move(info)) {}

status router_service::submit(serve::generation_request request,
                              std::shared_ptr<serve::generation_sink> sink) {
  if (!ready_) return error(errc::unavailable, "the service is shutting down");
  caf::anon_send(router_, submit_atom_v, generation_job{std::move(request), std::move(sink)});
  return ok_status();
}

void router_service::cancel(int64_t request_id) {
  caf::anon_send(router_, service_cancel{request_id});
}

std::string router_service::actors_json() const {
  auto snapshot = ask<registry_snapshot>(sys_, registry_, snapshot_atom_v);
  return snapshot ? registry_json(*snapshot) : "{}";
}

void router_service::collect_metrics(metrics::registry& into) const {
  if (auto router = ask<router_status>(sys_, router_, status_atom_v)) {
    collect_router_metrics(*router, into);
  }
  if (auto supervisor = ask<supervisor_status>(sys_, supervisor_, status_atom_v)) {
    balance_.collect(*supervisor, into);
  }
  if (auto roles = ask<role_statuses>(sys_, supervisor_, status_atom_v, true)) {
    collect_role_metrics(*roles, into);
  }
}

std::string router_service::status_json() const {
  auto router = ask<router_status>(sys_, router_, status_atom_v);
  auto roles = ask<role_statuses>(sys_, supervisor_, status_atom_v, true);
  std::optional<std::vector<node_status>> nodes;
  if (membership_) nodes = ask<std::vector<node_status>>(sys_, membership_, status_atom_v, true);
  return statuses_json(router ? &*router : nullptr, roles.value_or(role_statuses{}),
                       nodes.value_or(std::vector<node_status>{}));
}

std::string router_service::experts_json() const {
  return ask<std::string>(sys_, supervisor_, experts_atom_v).value_or("null");
}

std::string router_service::events_json(uint64_t since) const {
  return ask<std::string>(sys_, supervisor_, events_atom_v, since).value_or("[]");
}

status router_service::replan(uint64_t seed, double move_fraction, const std::string& kill) {
  const auto outcome = static_cast<replan_outcome>(
      ask<int32_t>(sys_, supervisor_, replan_atom_v, seed, move_fraction, kill)
          .value_or(static_cast<int32_t>(replan_outcome::busy)));
  switch (outcome) {
    case replan_outcome::started:
      return ok_status();
    case replan_outcome::no_such_actor:
      return error(errc::not_found,
                   "no live actor named '" + kill +
                       "' to kill, so no migration was started (GET /v1/actors lists them)");
    case replan_outcome::busy:
      break;
  }
  return error(errc::unavailable,
               "a migration is already in progress (or the topology is stopping); "
               "wait for it to finish (GET /v1/experts shows it) and try again");
}

status router_service::replan_randomly(uint64_t seed, const std::string& kill) {
  return replan(seed, 1.0, kill);
}

status router_service::kill_actor(const std::string& name) {
  if (!ask<bool>(sys_, supervisor_, kill_atom_v, name).value_or(false)) {
    return error(errc::not_found, "no live actor named '" + name + "'");
  }
  return ok_status();
}

status router_service::inject_fault(const serve::fault_request& f) {
  if (!membership_) {
    return error(errc::unsupported,
                 "fault injection on nodes needs a topology with nodes; this one runs in one "
                 "process (POST /v1/admin/kill kills its roles)");
  }
  fault_order o{f.node, f.kind, f.peer, f.rate, f.ms, f.for_ms, f.seed};
  const std::string why = ask<std::string>(sys_, membership_, fault_atom_v, o)
                              .value_or("the membership did not answer");
  if (!why.empty()) return error(errc::invalid_argument, why);
  return ok_status();
}

}  // namespace brigade::deploy

// The actor topology behind serve::inference_service: what the HTTP layer calls. Submissions and
// cancels are messages to the router, sent without waiting (the router answers through the
// request's sink, refusals included); introspection asks the actors with a bounded wait.
#pragma once

#include <caf/fwd.hpp>

#include <atomic>
#include <memory>
#include <string>

#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "deploy/membership.hpp"
#include "deploy/service_metrics.hpp"
#include "deploy/supervisor.hpp"
#include "serve/inference_service.hpp"

namespace brigade::deploy {

class router_service final : public serve::inference_service {
 public:
  /// `membership` is null for a topology in one process.
  router_service(caf::actor_system& sys, router_actor router, registry_actor registry,
                 supervisor_actor supervisor, membership_actor membership,
                 serve::service_info info);

  status submit(serve::generation_request request,
                std::shared_ptr<serve::generation_sink> sink) override;
  void cancel(int64_t request_id) override;
  serve::service_info info() const override { return info_; }
  bool ready() const override { return ready_; }
  std::string actors_json() const override;
  void collect_metrics(metrics::registry& into) const override;
  std::string status_json() const override;
  std::string experts_json() const override;
  std::string events_json(uint64_t since) const override;
  status replan_randomly(uint64_t seed, const std::string& kill) override;
  status kill_actor(const std::string& name) override;
  status inject_fault(const serve::fault_request& fault) override;

  /// Tests and fault injection: a re-plan moving about `move_fraction` of the slots.
  status replan(uint64_t seed, double move_fraction, const std::string& kill);
  /// Refuses new submissions from now on (the topology is stopping).
  void stop() { ready_ = false; }

 private:
  caf::actor_system& sys_;
  router_actor router_;
  registry_actor registry_;
  supervisor_actor supervisor_;
  membership_actor membership_;
  serve::service_info info_;
  std::atomic<bool> ready_{true};
  mutable balance_metrics balance_;  // scrapes are serialised by the HTTP layer
};

}  // namespace brigade::deploy

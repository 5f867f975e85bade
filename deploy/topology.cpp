#include "deploy/topology.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>

#include "actors/cache_metrics.hpp"
#include "actors/expert_layout.hpp"
#include "actors/message_types.hpp"
#include "actors/model_context.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "actors/spawn_checks.hpp"
#include "actors/supervisor.hpp"
#include "cluster/join_secret.hpp"
#include "common/metrics.hpp"
#include "deploy/membership.hpp"
#include "deploy/middleman_config.hpp"
#include "deploy/placement.hpp"
#include "deploy/scheduler_config.hpp"
#include "serve/speculation_metrics.hpp"

namespace brigade::deploy {

using namespace brigade::actors;

namespace {

// How long the service edge waits for the router or registry to answer.
constexpr std::chrono::seconds edge_timeout{10};

// Asks the supervisor for a random re-plan, killing `kill` (when not empty) as it starts.
status request_replan(caf::actor_system& sys, const supervisor_actor& supervisor, uint64_t seed,
                      double move_fraction, const std::string& kill) {
  caf::scoped_actor self{sys};
  auto outcome = replan_outcome::busy;
  self->request(supervisor, edge_timeout, replan_atom_v, seed, move_fraction, kill)
      .receive([&](int32_t o) { outcome = static_cast<replan_outcome>(o); }, [&](caf::error&) {});
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

// Fault injection: asks the supervisor to kill the named role actor.
status request_kill(caf::actor_system& sys, const supervisor_actor& supervisor,
                    const std::string& name) {
  caf::scoped_actor self{sys};
  bool killed = false;
  self->request(supervisor, edge_timeout, kill_atom_v, name)
      .receive([&](bool k) { killed = k; }, [&](caf::error&) {});
  if (!killed) return error(errc::not_found, "no live actor named '" + name + "'");
  return ok_status();
}

std::unique_ptr<caf::actor_system_config> make_config(const manifest& m) {
  auto cfg = std::make_unique<caf::actor_system_config>();
  configure_scheduler(*cfg);
  cfg->set("logger.verbosity", caf::atom("quiet"));
  register_message_types(*cfg);
  if (!m.nodes.empty()) {
    configure_middleman(*cfg, m.liveness.heartbeat_ms, m.liveness.dead_after_ms);
  }
  return cfg;
}

// Joins every node of the manifest through the membership, which keeps watching them.
result<std::vector<joined_node>> join_nodes(caf::actor_system& sys,
                                            const membership_actor& membership) {
  caf::scoped_actor self{sys};
  std::vector<joined_node> out;
  std::string failure;
  self->request(membership, std::chrono::seconds(60), join_atom_v)
      .receive([&](std::vector<joined_node>& joined) { out = std::move(joined); },
               [&](caf::error& err) { failure = sys.render(err); });
  if (!failure.empty()) return error(errc::unavailable, failure);
  return out;
}

// The router behind the inference_service interface. Blocking requests are used only here, at
// the edge, never inside an actor.
class actor_service final : public serve::inference_service {
 public:
  actor_service(caf::actor_system& sys, router_actor router, registry_actor registry,
                supervisor_actor supervisor, membership_actor membership, serve::service_info info)
      : sys_(sys),
        router_(std::move(router)),
        registry_(std::move(registry)),
        supervisor_(std::move(supervisor)),
        membership_(std::move(membership)),
        info_(std::move(info)) {}

  status submit(serve::generation_request request,
                std::shared_ptr<serve::generation_sink> sink) override {
    if (!ready_) return error(errc::unavailable, "the service is shutting down");
    caf::scoped_actor self{sys_};
    status out = error(errc::unavailable, "the router did not answer");
    self->request(router_, edge_timeout, submit_atom_v,
                  generation_job{std::move(request), std::move(sink)})
        .receive(
            [&](const submit_result& r) {
              out = r.accepted ? ok_status() : status(error(static_cast<errc>(r.code), r.message));
            },
            [&](caf::error& err) {
              out = error(errc::unavailable, "the router failed: " + sys_.render(err));
            });
    return out;
  }
  void cancel(int64_t request_id) override {
    caf::anon_send(router_, actors::service_cancel{request_id});
  }
  serve::service_info info() const override { return info_; }
  bool ready() const override { return ready_; }
  std::string actors_json() const override {
    caf::scoped_actor self{sys_};
    std::string out = "{}";
    self->request(registry_, edge_timeout, snapshot_atom_v)
        .receive([&](const registry_snapshot& s) { out = to_json(s); }, [&](caf::error&) {});
    return out;
  }
  void collect_metrics(metrics::registry& into) const override {
    caf::scoped_actor self{sys_};
    self->request(router_, edge_timeout, status_atom_v)
        .receive(
            [&](const role_status& s) {
              collect_cache_metrics(s, into);
              into.add_gauge("brigade_num_requests_running", "Requests prefilling or decoding.")
                  .get()
                  .set(s.in_flight);
              into.add_gauge("brigade_num_requests_waiting", "Requests waiting for a worker.")
                  .get()
                  .set(s.queue_depth);
            },
            [&](caf::error&) {});
    self->request(supervisor_, edge_timeout, status_atom_v)
        .receive([&](const role_status& s) { collect_balance_metrics(s, into); },
                 [&](caf::error&) {});
    self->request(supervisor_, edge_timeout, status_atom_v, true)
        .receive(
            [&](const std::vector<role_status>& all) {
              collect_store_metrics(all, into);
              collect_decode_metrics(all, into);
            },
            [&](caf::error&) {});
  }
  std::string experts_json() const override { return ask_text(experts_atom_v, "null"); }
  std::string status_json() const override;
  std::string events_json(uint64_t since) const override {
    caf::scoped_actor self{sys_};
    std::string out = "[]";
    self->request(supervisor_, edge_timeout, events_atom_v, since)
        .receive([&](std::string& j) { out = std::move(j); }, [&](caf::error&) {});
    return out;
  }
  status replan_randomly(uint64_t seed, const std::string& kill) override {
    return request_replan(sys_, supervisor_, seed, 1.0, kill);
  }
  status kill_actor(const std::string& name) override {
    return request_kill(sys_, supervisor_, name);
  }
  status inject_fault(const serve::fault_request& f) override {
    if (!membership_) {
      return error(errc::unsupported,
                   "fault injection on nodes needs a topology with nodes; this one runs in one "
                   "process (POST /v1/admin/kill kills its roles)");
    }
    fault_order o{f.node, f.kind, f.peer, f.rate, f.ms, f.for_ms, f.seed};
    caf::scoped_actor self{sys_};
    std::string why = "the membership did not answer";
    self->request(membership_, edge_timeout, fault_atom_v, o)
        .receive([&](std::string& w) { why = std::move(w); }, [&](caf::error&) {});
    if (!why.empty()) return error(errc::invalid_argument, why);
    return ok_status();
  }
  void stop() { ready_ = false; }

 private:
  template <class Atom>
  std::string ask_text(Atom atom, const char* fallback) const {
    caf::scoped_actor self{sys_};
    std::string out = fallback;
    self->request(supervisor_, edge_timeout, atom)
        .receive([&](std::string& j) { out = std::move(j); }, [&](caf::error&) {});
    return out;
  }
  // The decode workers' speculation counts, summed.
  static void collect_decode_metrics(const std::vector<role_status>& all, metrics::registry& into) {
    model::speculation_stats totals;
    for (const auto& s : all) {
      if (s.role != "decode") continue;
      const auto d = nlohmann::json::parse(s.detail, nullptr, false);
      if (!d.is_object() || !d.contains("speculation")) continue;
      totals.drafted_tokens += d["speculation"].value("drafted_tokens", int64_t{0});
      totals.accepted_tokens += d["speculation"].value("accepted_tokens", int64_t{0});
      totals.batch_limited_steps += d["speculation"].value("batch_limited_steps", int64_t{0});
    }
    serve::collect_speculation_metrics(totals, into);
  }
  // Expert balance as Prometheus figures; full matrices stay in /v1/experts.
  void collect_balance_metrics(const role_status& s, metrics::registry& into) const {
    const auto d = nlohmann::json::parse(s.detail, nullptr, false);
    if (!d.is_object()) return;
    into.add_gauge("brigade_expert_balancedness",
                   "Mean over max of the per-shard expert load in the last sample window.")
        .get()
        .set(d.value("balancedness", 1.0));
    auto& rebalances = into.add_counter("brigade_eplb_rebalances_total",
                                        "Expert re-plans by outcome.", {"outcome"});
    for (const char* outcome : {"adopted", "rolled_back", "rejected"}) {
      auto& c = rebalances.with({outcome});
      c.inc(d.value(std::string("rebalances_") + outcome, 0.0) - c.value());
    }
    into.add_gauge("brigade_eplb_migration_in_progress", "1 while experts are migrating.")
        .get()
        .set(s.in_flight);
    auto& durations = into.add_histogram("brigade_eplb_migration_duration_seconds",
                                         "Duration of expert migrations, adopted or rolled back.",
                                         {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60})
                          .get();
    const auto all = d.value("migration_durations_s", std::vector<double>{});
    for (size_t i = observed_durations_; i < all.size(); ++i)
      durations.observe(all[i]);
    observed_durations_ = all.size();
  }

  mutable size_t observed_durations_ = 0;  // scrapes are serialised by the HTTP layer
  caf::actor_system& sys_;
  router_actor router_;
  registry_actor registry_;
  supervisor_actor supervisor_;
  membership_actor membership_;  // null in one process
  serve::service_info info_;
  std::atomic<bool> ready_{true};
};

std::string last_path_part(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

struct topology::impl {
  std::shared_ptr<const model_context> ctx;
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  registry_actor registry;
  router_actor router;
  supervisor_actor supervisor;
  membership_actor membership;
  std::unique_ptr<actor_service> service;

  ~impl() {
    if (service) service->stop();
    if (sys) {
      if (membership) caf::anon_send_exit(membership, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
      sys->await_all_actors_done();
      // Pending delayed messages and request timeouts hold their actors until CAF's clock is
      // destroyed, which comes after CAF waits for detached actors to be destroyed: drop them.
      sys->clock().cancel_all();
    }
  }
};

topology::topology(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
topology::~topology() = default;

result<std::unique_ptr<topology>> topology::start(const deploy::manifest& m,
                                                  const model::load_progress& progress,
                                                  actors::cache_options cache) {
  const bool distributed = !m.nodes.empty();
  // A coordinator only routes: the nodes load the weights.
  auto ctx =
      distributed ? model_context::load_config(m.model) : model_context::load(m.model, progress);
  if (!ctx) return ctx.err();
  const model::model_config& c = ctx.value()->config;
  if (!c.is_moe()) {
    return error(errc::unsupported, m.model +
                                        " is a dense model; the actor topology serves "
                                        "mixture-of-experts models");
  }
  auto layout = expert_layout::initial(c, m.experts.count, m.experts.slots_per_shard);
  if (!layout) return error(errc::invalid_argument, m.source + ": " + layout.err().message);
  // Workers allocate their KV storage as they start: found too large there, they would crash
  // and restart until given up while the server looked up. In one process all workers share
  // its memory; on nodes, each node checks its own spawns.
  if (!distributed) {
    const uint64_t kv_here = static_cast<uint64_t>(m.decode.count) *
                                 kv_storage_bytes(c, m.decode.kv_tokens, m.block_tokens) +
                             static_cast<uint64_t>(m.prefill.count) *
                                 kv_storage_bytes(c, m.prefill.kv_tokens, m.block_tokens);
    if (status fits = check_kv_fits(kv_here,
                                    "the workers' KV storage (roles.decode.kv_tokens and "
                                    "roles.prefill.kv_tokens, times their counts)");
        !fits) {
      return error(errc::invalid_argument, m.source + ": " + fits.err().message);
    }
  }
  auto p = std::make_unique<impl>();
  p->ctx = ctx.value();
  p->cfg = make_config(m);
  p->sys = std::make_unique<caf::actor_system>(*p->cfg);
  supervisor_config sc{m, layout.value(), {}, {}, std::move(cache)};
  p->registry = spawn_registry(*p->sys);
  if (distributed) {
    auto secret = cluster::read_join_secret(m.join_secret_file);
    if (!secret) return secret.err();
    p->membership = spawn_membership(*p->sys, m, secret.value(), p->registry);
    auto joined = join_nodes(*p->sys, p->membership);
    if (!joined) return joined.err();
    sc.placement = place(m);
    for (const auto& j : joined.value())
      sc.agents[j.name] = j.agent;
  }
  p->router = spawn_router(*p->sys, router_config_for(m));
  actor_entry router_entry{"router", "router", "local", 1, 0, true, "", 0};
  caf::anon_send(p->registry, register_atom_v, router_entry);
  p->supervisor = spawn_supervisor(*p->sys, p->ctx, std::move(sc), p->registry, p->router);
  if (p->membership) caf::anon_send(p->membership, supervise_atom_v, p->supervisor);
  serve::service_info info;
  info.model_name = m.served_model_name.empty() ? last_path_part(m.model) : m.served_model_name;
  info.model_type = c.model_type;
  info.context_tokens = c.max_positions;
  info.vocab_size = c.vocab_size;
  for (const auto& s : m.kv_cache.scenarios)
    info.scenarios.push_back(s.name);
  info.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  p->service = std::make_unique<actor_service>(*p->sys, p->router, p->registry, p->supervisor,
                                               p->membership, info);
  return std::unique_ptr<topology>(new topology(std::move(p)));
}

serve::inference_service& topology::service() {
  return *impl_->service;
}

std::string actor_service::status_json() const {
  caf::scoped_actor self{sys_};
  nlohmann::json out = nlohmann::json::array();
  auto add = [&](const role_status& s) {
    out.push_back(
        {{"name", s.name},
         {"role", s.role},
         {"queue_depth", s.queue_depth},
         {"in_flight", s.in_flight},
         {"last_step_ms", s.last_step_ms},
         {"steps", s.steps},
         {"detail", nlohmann::json::parse(s.detail.empty() ? "{}" : s.detail, nullptr, false)}});
  };
  self->request(router_, edge_timeout, status_atom_v)
      .receive([&](const role_status& s) { add(s); }, [&](caf::error&) {});
  self->request(supervisor_, edge_timeout, status_atom_v, true)
      .receive(
          [&](const std::vector<role_status>& all) {
            for (const auto& s : all)
              add(s);
          },
          [&](caf::error&) {});
  if (membership_) {
    self->request(membership_, edge_timeout, status_atom_v, true)
        .receive(
            [&](const std::vector<role_status>& nodes) {
              for (const auto& s : nodes)
                add(s);
            },
            [&](caf::error&) {});
  }
  return out.dump();
}

const model::model_config& topology::config() const {
  return impl_->ctx->config;
}

status topology::kill(const std::string& actor_name) {
  return request_kill(*impl_->sys, impl_->supervisor, actor_name);
}

status topology::replan_randomly(uint64_t seed, double move_fraction, const std::string& kill) {
  return request_replan(*impl_->sys, impl_->supervisor, seed, move_fraction, kill);
}

std::string topology::experts_json() const {
  caf::scoped_actor self{*impl_->sys};
  std::string out = "{}";
  self->request(impl_->supervisor, edge_timeout, experts_atom_v)
      .receive([&](std::string& j) { out = std::move(j); }, [&](caf::error&) {});
  return out;
}

std::string topology::events_json(uint64_t since) const {
  caf::scoped_actor self{*impl_->sys};
  std::string out = "[]";
  self->request(impl_->supervisor, edge_timeout, events_atom_v, since)
      .receive([&](std::string& j) { out = std::move(j); }, [&](caf::error&) {});
  return out;
}

std::string topology::actors_json() const {
  return impl_->service->actors_json();
}

std::string topology::statuses_json() const {
  return impl_->service->status_json();
}

}  // namespace brigade::deploy

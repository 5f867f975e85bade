// A whole topology built from a manifest: the coordinator's actors (registry, router,
// supervisor, and with nodes the membership), the roles the supervisor spawns here or on the
// nodes, and the inference_service the HTTP layer talks to (deploy/router_service.hpp). No actor
// headers here: CAF stays out of the HTTP layer and the command line.
#pragma once

#include <memory>
#include <string>

#include "common/result.hpp"
#include "config/manifest.hpp"
#include "kvcache/clock.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"
#include "serve/inference_service.hpp"

namespace brigade::deploy {

class topology {
 public:
  /// Loads the model, spawns registry, router, supervisor, expert shards, the KV store, prefill
  /// and decode workers. `progress` gets (layers loaded, layers); `cache_clock` is what the
  /// prefix cache's retention reads in this process (null: the system clock; tests warp it).
  static result<std::unique_ptr<topology>> start(
      const config::manifest& manifest, const model::load_progress& progress = {},
      std::shared_ptr<const kvcache::clock> cache_clock = nullptr);
  ~topology();
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  /// The router as an inference_service: what `brigade serve` puts behind HTTP.
  serve::inference_service& service();
  /// Fault injection: kills the named role actor ("decode-0"); the supervisor restarts it.
  status kill(const std::string& actor_name);
  /// The registry snapshot as JSON (GET /v1/actors).
  std::string actors_json() const;
  /// Every role actor's status (queue depth, in-flight work, last step) as a JSON array.
  std::string statuses_json() const;
  const model::model_config& config() const;

  /// Tests and fault injection: migrates the experts to a random valid layout built from `seed`
  /// (every slot reshuffled, or about `move_fraction` of them moved). A non-empty `kill` names
  /// an actor killed as the migration starts, before it can prepare: an expert shard so killed
  /// dies mid-migration every time, and the migration rolls back. An error while a migration runs,
  /// or when `kill` names no live actor (then nothing starts).
  status replan_randomly(uint64_t seed, double move_fraction = 1.0, const std::string& kill = "");
  /// GET /v1/experts: current layout, per-shard load per sample window, balancedness history
  /// and the migration in flight, as JSON.
  std::string experts_json() const;
  /// The expert-balancing events after sequence number `since`, as a JSON array.
  std::string events_json(uint64_t since) const;

 private:
  struct impl;
  explicit topology(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace brigade::deploy

// `brigade node`: a node agent that a coordinator deploys role actors onto.
#include <pthread.h>
#include <unistd.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "cluster/join_secret.hpp"
#include "cluster/node_agent.hpp"
#include "config/middleman_config.hpp"
#include "config/scheduler_config.hpp"
#include "deploy/message_types.hpp"

namespace brigade::cli {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade node: %s\n", message.c_str());
  return 1;
}

// A stop that does not finish in time, or a second signal, ends the process there, naming what
// still ran: a node that ignores SIGTERM is killed by its supervisor (systemd, Kubernetes)
// without a word.
void force_exit_later(sigset_t signals, std::chrono::seconds timeout,
                      std::shared_ptr<cluster::role_census> census) {
  std::thread([signals, timeout, census] {
    const timespec wait{static_cast<time_t>(timeout.count()), 0};
    const int again = sigtimedwait(&signals, nullptr, &wait);
    std::string running;
    for (const auto& n : census->names())
      running += (running.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "brigade node: %s; exiting now with %s still running\n",
                 again > 0 ? "a second signal" : "the stop timed out",
                 running.empty() ? "no role (the actor system was stopping)" : running.c_str());
    std::fflush(stderr);
    std::_Exit(again > 0 ? 130 : 1);
  }).detach();
}

// The order that cannot deadlock: the agent tells its coordinators the node leaves and stops its
// roles (their work fails over), then the data plane (a bounded flush), then every actor ends.
// Once they have all ended the process exits without waiting for CAF to destroy them: CAF 0.17
// waits for each detached actor's object to be destroyed, and references to a role that ended
// outlive it in CAF's own queues (its clock keeps pending delayed messages and request timeouts
// until the clock itself is destroyed, after that wait), so that wait never ended after a peer
// node had died.
[[noreturn]] void leave(caf::actor_system& sys, const cluster::node_agent_actor& agent) {
  {
    caf::scoped_actor self{sys};
    self->monitor(agent);
    self->send(agent, actors::leave_atom_v);
    self->receive([](const caf::down_msg&) {});
  }
  sys.await_all_actors_done();
  std::printf("brigade node: stopped\n");
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace

int node(int argc, char** argv) {
  std::string listen, secret_file, name;
  CLI::App app{"Run a node agent: coordinators that prove the join secret deploy actors here",
               "brigade node"};
  app.option_defaults()->always_capture_default();
  app.add_option("--listen", listen, "HOST:PORT for coordinators to connect to")->required();
  app.add_option("--join-secret-file", secret_file, "file holding the cluster's join secret")
      ->required();
  app.add_option("--name", name, "node name reported to the coordinator (default HOST:PORT)");
  int heartbeat_ms = 200, dead_after_ms = 3000;
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeats to the coordinator, every N ms")
      ->check(CLI::Range(10, 60000));
  int stop_timeout_s = 10;
  app.add_option("--stop-timeout-s", stop_timeout_s,
                 "on SIGTERM/SIGINT, exit at the latest after this long; a second signal exits "
                 "at once")
      ->check(CLI::Range(1, 3600));
  app.add_option("--dead-after-ms", dead_after_ms,
                 "the coordinator counts as out of contact after N ms of silence (its roles "
                 "are then kept for the grace period it set)")
      ->check(CLI::Range(100, 3600000));
  CLI11_PARSE(app, argc, argv);
  const auto colon = listen.rfind(':');
  int port = -1;
  try {
    size_t used = 0;
    const std::string digits = colon == std::string::npos ? "" : listen.substr(colon + 1);
    port = std::stoi(digits, &used);
    if (used != digits.size()) port = -1;  // "7100abc"
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) return fail("--listen '" + listen + "' must be HOST:PORT");
  const std::string host = listen.substr(0, colon);
  auto secret = cluster::read_join_secret(secret_file);
  if (!secret) return fail(secret.err().message);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  config::configure_scheduler(cfg);
  deploy::register_message_types(cfg);
  config::configure_middleman(cfg, heartbeat_ms, dead_after_ms);
  auto census = std::make_shared<cluster::role_census>();
  caf::actor_system sys{cfg};
  const std::string node_name = name.empty() ? listen : name;
  auto agent = cluster::spawn_node_agent(sys, {node_name, secret.value(), census});
  auto published = sys.middleman().publish(agent, static_cast<uint16_t>(port), host.c_str(), true);
  if (!published) return fail("cannot listen on " + listen + ": " + sys.render(published.error()));
  std::printf("brigade node %s: listening on %s:%u (pid %d)\n", node_name.c_str(), host.c_str(),
              *published, static_cast<int>(::getpid()));
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::printf("brigade node: stopping (%s); a second signal, or %d s, forces the exit\n",
              strsignal(signal_number), stop_timeout_s);
  std::fflush(stdout);
  force_exit_later(signals, std::chrono::seconds(stop_timeout_s), census);
  leave(sys, agent);
}

}  // namespace brigade::cli

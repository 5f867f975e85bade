// `brigade node`: a node agent that a coordinator deploys role actors onto.
#include <pthread.h>
#include <unistd.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "actors/message_types.hpp"
#include "cli/commands.hpp"
#include "cluster/join_secret.hpp"
#include "cluster/node_agent.hpp"
#include "deploy/middleman_config.hpp"
#include "deploy/scheduler_config.hpp"

namespace brigade::cli {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade node: %s\n", message.c_str());
  return 1;
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
  deploy::configure_scheduler(cfg);
  actors::register_message_types(cfg);
  deploy::configure_middleman(cfg, heartbeat_ms, dead_after_ms);
  caf::actor_system sys{cfg};
  auto agent = cluster::spawn_node_agent(sys, {name.empty() ? listen : name, secret.value()});
  auto published = sys.middleman().publish(agent, static_cast<uint16_t>(port), host.c_str(), true);
  if (!published) return fail("cannot listen on " + listen + ": " + sys.render(published.error()));
  std::printf("brigade node %s: listening on %s:%u (pid %d)\n",
              (name.empty() ? listen : name).c_str(), host.c_str(), *published,
              static_cast<int>(::getpid()));
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::printf("brigade node: stopping\n");
  std::fflush(stdout);
  caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
  return 0;
}

}  // namespace brigade::cli

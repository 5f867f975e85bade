// `brigade deploy [--dry-run] MANIFEST`: prints the placement, or deploys the topology across the
// manifest's nodes and keeps it running (without HTTP; `brigade serve MANIFEST` adds the API).
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "actors/shard_set.hpp"
#include "cli/commands.hpp"
#include "common/progress.hpp"
#include "config/manifest.hpp"
#include "config/role_placement.hpp"
#include "deploy/device_check.hpp"
#include "deploy/group_placement_check.hpp"
#include "deploy/topology.hpp"
#include "model/config.hpp"

namespace brigade::cli {

namespace {

// Whether the manifest's expert slots hold the model it names, when the model is readable here
// (the nodes may have it where this machine does not).
int check_slots(const config::manifest& m) {
  auto c = model::load_config(m.model);
  if (!c) {
    std::printf("expert slots not checked: %s\n", c.err().message.c_str());
    return 0;
  }
  if (!c->is_moe()) {
    std::printf("%s is a dense model: the actor topology serves mixture-of-experts models\n",
                m.model.c_str());
    return 1;
  }
  auto layout = actors::initial_layout(c.value(), m.experts.count, m.experts.slots_per_shard);
  if (!layout) {
    std::fprintf(stderr, "brigade deploy: %s: %s\n", m.source.c_str(),
                 layout.err().message.c_str());
    return 1;
  }
  if (status groups = deploy::check_group_placement(m, c.value(), layout.value()); !groups) {
    std::fprintf(stderr, "brigade deploy: %s: %s\n", m.source.c_str(),
                 groups.err().message.c_str());
    return 1;
  }
  // A device absent or too small is refused now, not by every role failing to start.
  if (status devices = deploy::check_local_devices_here(m, c.value(), layout.value()); !devices) {
    std::fprintf(stderr, "brigade deploy: %s\n", devices.err().message.c_str());
    return 1;
  }
  if (!m.nodes.empty() && deploy::uses_cuda(m)) {
    std::printf("devices: each node checks its roles' devices when it spawns them\n");
  }
  const int slots = layout->slots();
  std::printf("experts: %d per layer (%s); %d slots, %d spare for replicas of hot experts\n",
              c->num_experts, c->model_type.c_str(), slots, slots - c->num_experts);
  return 0;
}

}  // namespace

int deploy(int argc, char** argv) {
  std::string path;
  bool dry_run = false;
  CLI::App app{"Deploy a manifest's topology (or print its placement with --dry-run)",
               "brigade deploy"};
  app.option_defaults()->always_capture_default();
  app.add_option("manifest", path, "cluster manifest (YAML)")->required();
  app.add_flag("--dry-run", dry_run, "print the placement, node by node, and exit");
  CLI11_PARSE(app, argc, argv);
  auto m = config::load_manifest(path);
  if (!m) return std::fprintf(stderr, "brigade deploy: %s\n", m.err().message.c_str()), 1;
  if (dry_run) {
    std::printf("%s", config::describe_placement(m.value()).c_str());
    return check_slots(m.value());
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  progress_bar bar("loading " + m->model);
  auto topo = deploy::topology::start(m.value(), [&](size_t d, size_t t) { bar.update(d, t); });
  if (!topo) return std::fprintf(stderr, "brigade deploy: %s\n", topo.err().message.c_str()), 1;
  bar.finish();
  std::printf("brigade deploy: topology up\n%s", config::describe_placement(m.value()).c_str());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  return 0;
}

}  // namespace brigade::cli

// `brigade chaos SCENARIO.yaml... [--seed N] [--repeat K] [--random N] [--soak] [--json]`:
// fault-injection scenarios against real processes (docs/chaos.md).
#include <dirent.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <mutex>

#include "chaos/random_scenario.hpp"
#include "chaos/report.hpp"
#include "chaos/runner.hpp"
#include "chaos/scenario.hpp"
#include "cli/commands.hpp"

namespace brigade::cli {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "brigade chaos: %s\n", message.c_str());
  return 2;
}

// A directory stands for the scenarios in it.
std::vector<std::string> expand(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    DIR* d = ::opendir(p.c_str());
    if (!d) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) {
        found.push_back(p + "/" + name);
      }
    }
    ::closedir(d);
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "brigade";
}

// Event lines go to stderr with --json (stdout holds the JSON), else to stdout; the progress
// line is redrawn in place on a terminal only.
struct console {
  bool json = false;
  bool tty = ::isatty(STDERR_FILENO) != 0;
  bool progress_shown = false;
  std::mutex mutex;

  void line(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    clear_progress();
    std::fprintf(json ? stderr : stdout, "%s\n", text.c_str());
    std::fflush(json ? stderr : stdout);
  }
  void progress(const std::string& text) {
    if (!tty) return;
    std::lock_guard<std::mutex> lock(mutex);
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    progress_shown = true;
  }
  void clear_progress() {
    if (!progress_shown) return;
    std::fprintf(stderr, "\r\033[K");
    progress_shown = false;
  }
};

}  // namespace

int chaos(int argc, char** argv) {
  std::vector<std::string> files;
  uint64_t seed = 1;
  int repeat = 1, random_runs = 0, random_from = 0;
  bool json = false, soak = false;
  std::string workdir = "/tmp/brigade-chaos";
  CLI::App app{
      "Run fault-injection scenarios against real brigade processes: every request must "
      "end once, with the single-process engine's answer, and the cluster must notice "
      "and recover within the scenario's bounds",
      "brigade chaos"};
  app.add_option("scenarios", files, "scenario files (YAML), or directories of them");
  app.add_option("--seed", seed, "seed of the workload, the random fault times and --random")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "run each scenario K times, with seeds S, S+1, ...")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--random", random_runs, "also run N scenarios drawn from the seed")
      ->check(CLI::Range(0, 1000000));
  app.add_option(
         "--random-from", random_from,
         "the first random scenario's number (to run one again: --random 1 --random-from K)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--soak", soak, "ten times the requests of each scenario");
  app.add_flag("--json", json, "print the report as JSON on stdout (event lines on stderr)");
  app.add_option("--workdir", workdir, "where each run keeps its logs")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  files = expand(files);
  if (files.empty() && random_runs == 0) {
    return fail("give scenario files (deploy/scenarios/ holds a library) or --random N");
  }
  std::vector<chaos::scenario> scenarios;
  for (const auto& f : files) {
    auto s = chaos::load_scenario(f);
    if (!s) return fail(s.err().message);
    scenarios.push_back(std::move(s.value()));
  }
  console out;
  out.json = json;
  std::vector<chaos::run_result> results;
  std::vector<std::string> reproduce;
  const size_t total =
      scenarios.size() * static_cast<size_t>(repeat) + static_cast<size_t>(random_runs);
  auto run_one = [&](const chaos::scenario& s, uint64_t run_seed, const std::string& again) {
    out.line("chaos: " + s.name + " (seed " + std::to_string(run_seed) + ", run " +
             std::to_string(results.size() + 1) + " of " + std::to_string(total) + ")" +
             (s.about.empty() ? "" : ": " + s.about));
    chaos::run_options o;
    o.brigade = self_path();
    o.workdir = workdir;
    o.seed = run_seed;
    o.soak = soak;
    o.on_event = [&](const std::string& l) { out.line(l); };
    o.on_progress = [&](const std::string& l) { out.progress(l); };
    auto r = chaos::run_scenario(s, o);
    if (!r) {
      chaos::run_result broken;
      broken.scenario = s.name;
      broken.source = s.source;
      broken.seed = run_seed;
      broken.failures.push_back("the run could not be made: " + r.err().message);
      r = broken;
    }
    out.line(std::string("  ") + (r->ok() ? "PASS" : "FAIL") + "  " + std::to_string(r->completed) +
             "/" + std::to_string(r->requests) + " complete, " + std::to_string(r->errors) +
             " errors, " + std::to_string(r->lost) + " lost, " + std::to_string(r->duplicated) +
             " duplicated, " + std::to_string(r->diverged) + " diverged; logs in " + r->logs);
    for (const auto& f : r->failures)
      out.line("    " + f);
    if (!r->ok()) reproduce.push_back(again);
    results.push_back(std::move(r.value()));
  };
  for (const auto& s : scenarios) {
    for (int k = 0; k < repeat; ++k) {
      const uint64_t run_seed = seed + static_cast<uint64_t>(k);
      run_one(s, run_seed, "brigade chaos " + s.source + " --seed " + std::to_string(run_seed));
    }
  }
  for (int i = random_from; i < random_from + random_runs; ++i) {
    run_one(chaos::random_scenario(seed, i), seed,
            "brigade chaos --random 1 --random-from " + std::to_string(i) + " --seed " +
                std::to_string(seed));
  }
  out.clear_progress();
  if (json) {
    std::printf("%s\n", chaos::report_json(results).dump(2).c_str());
  } else {
    std::printf("\n%s", chaos::report_table(results).c_str());
  }
  if (!reproduce.empty()) {
    std::fprintf(stderr, "\n%zu of %zu runs failed; reproduce with:\n", reproduce.size(),
                 results.size());
    for (const auto& r : reproduce)
      std::fprintf(stderr, "  %s\n", r.c_str());
    return 1;
  }
  return 0;
}

}  // namespace brigade::cli

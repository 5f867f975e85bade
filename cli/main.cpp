// brigade: one binary, many subcommands (see `brigade help`).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.hpp"
#include "gpu/cpu/kernel_path.hpp"

namespace {

struct command {
  const char* name;
  brigade::cli::command_fn fn;
  const char* summary;
};

const command commands[] = {
    {"run-default", brigade::cli::run_default,
     "run brigade on its embedded default model (what `make run` does)"},
    {"make-model", brigade::cli::make_model,
     "write a small random checkpoint in the Hugging Face format"},
    {"generate", brigade::cli::generate, "generate text offline with the single-process engine"},
    {"serve", brigade::cli::serve, "serve the OpenAI-compatible HTTP API"},
    {"bench", brigade::cli::bench, "run a benchmark (brigade bench --help lists them)"},
    {"plan-experts", brigade::cli::plan_experts,
     "plan a layout of experts onto shard slots from measured loads"},
    {"node", brigade::cli::node, "run a node agent that a coordinator deploys actors onto"},
    {"chaos", brigade::cli::chaos,
     "run fault-injection scenarios against real processes and check nothing is lost"},
    {"deploy", brigade::cli::deploy,
     "deploy a manifest across its nodes (--dry-run prints the placement)"},
    {"top", brigade::cli::top,
     "watch a running server in the terminal: roles, shard load, balancedness, events"},
    {"replay", brigade::cli::replay,
     "replay a request trace through the prefix cache and placement"},
    {"tokenize", brigade::cli::tokenize,
     "print the token ids of text with a model's tokenizer (--jsonl for a batch)"},
    {"detokenize", brigade::cli::detokenize,
     "print the text of token ids with a model's tokenizer"},
};

void print_help() {
  std::printf("usage: brigade <command> [options]   (brigade <command> --help for details)\n\n");
  for (const auto& c : commands)
    std::printf("  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  // A forced kernel path this CPU cannot run is refused here, with the paths it can.
  if (const char* forced = std::getenv("BRIGADE_CPU_KERNELS"); forced && *forced) {
    auto path = brigade::gpu::cpu::choose_kernel_path(forced);
    if (!path) {
      std::fprintf(stderr, "brigade: BRIGADE_CPU_KERNELS=%s: %s\n", forced,
                   path.err().message.c_str());
      return 2;
    }
  }
  for (const auto& c : commands) {
    if (!std::strcmp(argv[1], c.name)) {
      const std::string full = std::string("brigade ") + c.name;
      argv[1] = const_cast<char*>(full.c_str());
      // Commands report what they expect to fail as statuses; this catches the rest (a device
      // error deep in a kernel launch, say) so that it ends the command with its message rather
      // than std::terminate's.
      try {
        return c.fn(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", full.c_str(), e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "brigade: unknown command '%s'\n\n", argv[1]);
  print_help();
  return 2;
}

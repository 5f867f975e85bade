// Temporary: commands whose implementation lands with the engine.
#include <cstdio>

#include "cli/commands.hpp"

namespace brigade::cli {

int make_model(int, char**) { return std::fprintf(stderr, "make-model: not built yet\n"), 1; }
int generate(int, char**) { return std::fprintf(stderr, "generate: not built yet\n"), 1; }
int run_default(int, char**) { return std::fprintf(stderr, "run-default: not built yet\n"), 1; }

}  // namespace brigade::cli

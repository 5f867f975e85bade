// `brigade run-default`: what `make run` starts: `brigade serve` on the embedded default model
// (the trained pair in models/default, docs/default_model.md), listening on 127.0.0.1:8000.
// Extra arguments go to serve (e.g. --listen 0.0.0.0:8080).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace brigade::cli {

int run_default(int argc, char** argv) {
  std::vector<std::string> args = {"brigade serve", "--model", BRIGADE_DEFAULT_MODEL_DIR};
  bool named = false;
  for (int i = 1; i < argc; ++i) {
    args.emplace_back(argv[i]);
    named = named || args.back().rfind("--served-model-name", 0) == 0;
  }
  // Clients (and the README's examples) ask for "default-model", not the directory's name.
  if (!named) args.insert(args.end(), {"--served-model-name", "default-model"});
  std::vector<char*> cargs;
  for (auto& a : args)
    cargs.push_back(a.data());
  std::printf("brigade: serving the embedded default model (%s); Ctrl-C stops it\n",
              BRIGADE_DEFAULT_MODEL_DIR);
  std::fflush(stdout);
  return serve(static_cast<int>(cargs.size()), cargs.data());
}

}  // namespace brigade::cli

// `brigade run-default`: what `make run` starts. Until serving lands it generates offline from
// the embedded default model.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace brigade::cli {

int run_default(int argc, char** argv) {
  std::vector<std::string> args = {"brigade generate", "--model", BRIGADE_DEFAULT_MODEL_DIR,
                                   "--prompt", "The brigade of experts", "--max-tokens", "32"};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  std::printf("brigade: generating from the embedded default model (%s)\n",
              BRIGADE_DEFAULT_MODEL_DIR);
  return generate(static_cast<int>(cargs.size()), cargs.data());
}

}  // namespace brigade::cli

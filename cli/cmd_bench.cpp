// `brigade bench <name> [options]`: dispatches to the benchmarks in bench/.
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/benchmarks.hpp"
#include "cli/commands.hpp"

namespace brigade::cli {

int bench(int argc, char** argv) {
  int count = 0;
  const bench::bench_entry* entries = bench::registered_benchmarks(&count);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::printf("usage: brigade bench <name> [--json] [options]\n\n");
    for (int i = 0; i < count; ++i)
      std::printf("  %-10s %s\n", entries[i].name, entries[i].summary);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 0; i < count; ++i) {
    if (!std::strcmp(argv[1], entries[i].name)) {
      const std::string full = std::string("brigade bench ") + entries[i].name;
      argv[1] = const_cast<char*>(full.c_str());
      return entries[i].fn(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "brigade bench: unknown benchmark '%s' (brigade bench --help lists them)\n",
               argv[1]);
  return 2;
}

}  // namespace brigade::cli

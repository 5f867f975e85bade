// The benchmarks behind `brigade bench <name>`. Each parses its own options, compares side by
// side in one run, prints a table (or one JSON object with --json) and returns an exit code.
#pragma once

namespace brigade::bench {

using bench_fn = int (*)(int argc, char** argv);

struct bench_entry {
  const char* name;
  bench_fn fn;
  const char* summary;
};

/// Every benchmark, in the order `brigade bench --help` lists them.
const bench_entry* registered_benchmarks(int* count);

}  // namespace brigade::bench

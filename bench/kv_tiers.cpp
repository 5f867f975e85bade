// `brigade bench kvtiers`: the time one cached KV block takes to reach a worker from host memory,
// from SSD (page cache warm and dropped) and through the tiered store on an SSD hit, side by side
// in one run on the same blocks.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/kv_tier_timing.hpp"
#include "bench/table.hpp"

namespace brigade::bench {

namespace {

void print_table(const tier_timing& t, int blocks) {
  const double host_copy_us = t.paths.at(1).median_us();
  table out({"path", "median us", "p90 us", "GB/s", "x host copy"});
  for (const path_timing& p : t.paths) {
    const double median = p.median_us();
    const std::string gb_per_s =
        p.moves_block ? fixed(static_cast<double>(t.block_bytes) / (median * 1e3), 2) : "-";
    out.add_row({p.name, fixed(median, 1), fixed(p.p90_us(), 1), gb_per_s,
                 fixed(median / host_copy_us, 2)});
  }
  std::printf("KV block of %.2f MiB, %d blocks per path, SSD directory on %s\n\n",
              static_cast<double>(t.block_bytes) / (1 << 20), blocks, t.file_system.c_str());
  std::printf("%s\n", out.render().c_str());
  std::printf("page cache after posix_fadvise(DONTNEED): %.1f%% of block pages still resident%s\n",
              100 * t.cold_resident_fraction,
              t.file_system == "tmpfs" ? " (tmpfs: the SSD rows are RAM figures)" : "");
}

void print_json(const tier_timing& t, int blocks) {
  nlohmann::json doc;
  doc["benchmark"] = "kvtiers";
  doc["block_bytes"] = t.block_bytes;
  doc["blocks"] = blocks;
  doc["file_system"] = t.file_system;
  doc["cold_resident_fraction"] = t.cold_resident_fraction;
  for (const path_timing& p : t.paths) {
    doc["paths"].push_back(
        {{"path", p.name}, {"median_us", p.median_us()}, {"p90_us", p.p90_us()}});
  }
  std::printf("%s\n", doc.dump().c_str());
}

}  // namespace

int kv_tiers(int argc, char** argv) {
  tier_timing_options o;
  o.dir = std::filesystem::temp_directory_path().string();
  std::string dtype = "f32";
  bool json = false;
  CLI::App app{"Time to fetch one KV block from host memory, SSD and the tiered store.",
               "brigade bench kvtiers"};
  app.option_defaults()->always_capture_default();
  app.add_option("--layers", o.shape.layers, "model layers")->check(CLI::Range(1, 1024));
  app.add_option("--block-tokens", o.shape.block_tokens, "tokens per KV block")
      ->check(CLI::Range(1, 4096));
  app.add_option("--kv-heads", o.shape.kv_heads, "key/value heads")->check(CLI::Range(1, 1024));
  app.add_option("--head-dim", o.shape.head_dim, "head dimension")->check(CLI::Range(1, 4096));
  app.add_option("--dtype", dtype, "element type")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--blocks", o.blocks, "blocks timed per path")->check(CLI::Range(1, 4096));
  app.add_option("--dir", o.dir, "directory for the SSD tier's files (on the disk to measure)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--json", json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.shape.dtype = dtype == "f32"   ? kvcache::kv_dtype::f32
                  : dtype == "f16" ? kvcache::kv_dtype::f16
                                   : kvcache::kv_dtype::bf16;
  result<tier_timing> t = measure_tier_timing(o);
  if (!t.ok()) {
    std::fprintf(stderr, "brigade bench kvtiers: %s\n", t.err().describe().c_str());
    return 1;
  }
  json ? print_json(*t, o.blocks) : print_table(*t, o.blocks);
  return 0;
}

}  // namespace brigade::bench

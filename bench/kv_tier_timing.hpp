// How long one cached KV block takes to reach a worker from each tier: host memory, SSD with the
// page cache warm, SSD with it dropped, and through the tiered store end to end. Used by
// `brigade bench kvtiers`; `brigade bench cache` can call it for the per-tier part of its time
// to first token.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "kvcache/model_fingerprint.hpp"

namespace brigade::bench {

struct tier_timing_options {
  /// OLMoE-1B-7B's KV layout by default: 16 layers, 16 kv heads of 128, 16-token blocks, f32.
  kvcache::kv_block_shape shape{16, 16, 16, 128, kvcache::kv_dtype::f32};
  /// Blocks timed per path; each figure is over all of them.
  int blocks = 32;
  /// Where the SSD tier's files go (a fresh subdirectory, removed afterwards).
  std::string dir;
};

/// One path's per-block times in microseconds.
struct path_timing {
  std::string name;
  std::vector<double> us;
  /// False for paths that hand over a pointer or only start work: no bytes per second.
  bool moves_block = true;
  double median_us() const;
  double p90_us() const;
};

struct tier_timing {
  std::size_t block_bytes = 0;
  /// The file system under `dir` ("ext4", "tmpfs", ...): tmpfs makes the SSD rows RAM figures.
  std::string file_system;
  /// The fraction of block-file pages still in the page cache after posix_fadvise(DONTNEED), by
  /// mincore(): near 0 means the cold rows really read the device.
  double cold_resident_fraction = 0;
  /// In order: host fetch, host fetch + copy, first touch of a block's worth of new memory, SSD
  /// write, SSD read warm, SSD read cold, store lookup on an SSD block, store SSD hit promoted +
  /// fetched + copied.
  std::vector<path_timing> paths;
};

result<tier_timing> measure_tier_timing(const tier_timing_options& options);

}  // namespace brigade::bench

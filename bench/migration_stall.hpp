// Step times while experts migrate: decode steps through the topology while the supervisor
// moves experts to new layouts, beside the steps outside migrations, in one run.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::bench {

struct migration_stall_figures {
  bool two_nodes = false;  ///< Shards on two node processes: experts crossing over the data plane.
  int migrations = 0;
  int steps_during = 0;
  int steps_outside = 0;
  double median_ms = 0;       ///< Median step time outside migrations.
  double p99_during_ms = 0;   ///< p99 of steps that overlapped a migration.
  double p99_outside_ms = 0;  ///< p99 of the others: the noise floor.
  double mean_migration_s = 0;
  double p99_ratio() const { return p99_during_ms / median_ms; }
  double noise_ratio() const { return p99_outside_ms / median_ms; }
};

/// Generates a model in `work_dir`, decodes 32 sequences through a 4-shard topology and runs
/// `migrations` random re-plans, timing every step from the tokens' arrival. With `two_nodes`
/// the roles run on two `brigade node` processes on loopback (2 shards each), so experts that
/// change nodes are copied over the data plane; otherwise everything runs in this process.
result<migration_stall_figures> measure_migration_stall(const std::string& work_dir, int migrations,
                                                        bool two_nodes = false);

}  // namespace brigade::bench

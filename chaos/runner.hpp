// One run of a fault scenario: deploy the topology as real processes, drive the workload, inject
// the faults on schedule, watch the cluster notice and recover, and check the oracle (every
// request answered once, every complete answer the single-process engine's, bounded detection
// and recovery, no KV block leaked, memory back near its baseline).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "chaos/scenario.hpp"
#include "common/result.hpp"

namespace brigade::chaos {

struct run_options {
  std::string brigade;  ///< The brigade executable for the processes.
  std::string workdir;  ///< Where runs keep their logs (a folder per run).
  uint64_t seed = 1;
  bool soak = false;  ///< Ten times the requests.
  /// Event lines as they happen (fault, detection, restart, re-dispatch, recovery).
  std::function<void(const std::string&)> on_event;
  /// A one-line progress report, refreshed while the run goes.
  std::function<void(const std::string&)> on_progress;
};

/// What happened to one fault.
struct fault_result {
  std::string what;
  int64_t at_ms = -1;           ///< When it struck, since the workload started.
  int64_t healed_ms = -1;       ///< When a timed fault ended.
  int64_t detect_ms = -1;       ///< Until the cluster noticed; -1 when it is not a thing to notice.
  bool detected = true;         ///< False: noticeable, and not noticed.
  int64_t serve_again_ms = -1;  ///< From the fault (or its end, see from_end) to a new request
                                ///< served.
  bool from_end = false;        ///< serve_again counts from the fault's end (a stopped
                                ///< coordinator, a data-plane cut between nodes in contact).
  std::string noticed_as;       ///< The event that counted as detection.
  int64_t exit_ms = -1;         ///< term: until the process exited (-1: it did not).
};

struct latency_stats {
  int64_t samples = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

struct run_result {
  std::string scenario;
  std::string source;
  uint64_t seed = 0;
  int requests = 0;
  int completed = 0;
  int errors = 0;
  int lost = 0;
  int duplicated = 0;
  int diverged = 0;
  std::vector<fault_result> faults;
  latency_stats ttft_recovery, ttft_outside, tpot_recovery, tpot_outside;
  int kv_pools_checked = 0;
  std::vector<std::string> kv_leaks;  ///< Pools whose blocks did not come back.
  double memory_growth = 0;           ///< Worst surviving node's RSS over its baseline.
  std::string memory_growth_node;     ///< That node, with its RSS before and after.
  int64_t duration_ms = 0;
  std::vector<std::string> failures;  ///< Checks that failed, one sentence each.
  std::string logs;                   ///< The run's folder.

  bool ok() const { return failures.empty(); }
};

/// Runs `s` once with `options.seed`. An error only when the run itself could not be made
/// (the model, the processes); a failed check is in the result.
result<run_result> run_scenario(const scenario& s, const run_options& options);

struct seen_event;

/// When the kill of fault `index` (of `actor`) could land: its time, or, when the actor's node
/// was cut off from the coordinator's control plane or stopped then, when that ended (a kill
/// goes through the coordinator and waits for the node). Detection counts from there.
int64_t kill_lands_at(const scenario& s, const std::vector<fault_result>& faults, size_t index,
                      const std::string& actor, const std::vector<seen_event>& seen);

}  // namespace brigade::chaos

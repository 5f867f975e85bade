// The oracle of a chaos run, applied to what the run recorded: how every request ended against
// the engine's answers, detection and recovery against the scenario's bounds, latency inside and
// outside recovery, and the KV pools at the end.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "chaos/driver.hpp"
#include "chaos/runner.hpp"
#include "chaos/workload.hpp"

namespace brigade::chaos {

/// Counts the outcomes, compares complete answers with `expected` (the probes with
/// `probe_expected`), computes the latency figures and adds a failure per check that does not
/// hold to `r`.
void judge(const scenario& s, const std::vector<request_spec>& requests,
           const std::vector<std::string>& expected, const std::vector<outcome>& outcomes,
           const std::vector<std::pair<request_spec, outcome>>& probes,
           const std::vector<std::string>& probe_expected, run_result& r);

/// Reads the pools out of GET /v1/status: every decode pool wholly free, every prefill pool
/// holding only cached blocks, nothing pinned.
void check_pools(const nlohmann::json& status, run_result& r);

/// The p50 and p99 of `values` (nearest rank).
latency_stats percentiles(std::vector<double> values);

}  // namespace brigade::chaos

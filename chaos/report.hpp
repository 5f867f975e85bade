// What `brigade chaos` prints at the end: a table of the runs, and the same figures as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chaos/runner.hpp"

namespace brigade::chaos {

/// One row per run: requests and how they ended, detection and recovery, latency in and out of
/// recovery, leaks, memory, and the verdict.
std::string report_table(const std::vector<run_result>& runs);
/// {"runs": [...], "total": {...}}: per run and in total, requests, completed, errors, lost,
/// duplicated, diverged, detection and recovery times.
nlohmann::json report_json(const std::vector<run_result>& runs);

}  // namespace brigade::chaos

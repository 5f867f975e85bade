#include "chaos/report.hpp"

#include <algorithm>
#include <cstdio>

namespace brigade::chaos {
namespace {

std::string ms_list(const std::vector<fault_result>& faults, bool detect) {
  std::string out;
  for (const auto& f : faults) {
    const int64_t v = detect ? f.detect_ms : f.serve_again_ms;
    if (detect && !f.detected) {
      out += (out.empty() ? "" : " ") + std::string("never");
    } else if (v >= 0) {
      out += (out.empty() ? "" : " ") + std::to_string(v);
    }
  }
  return out.empty() ? "-" : out;
}

std::string pair_ms(const latency_stats& s) {
  if (s.samples == 0) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f/%.0f", s.p50_ms, s.p99_ms);
  return buf;
}

nlohmann::json latency_json(const latency_stats& s) {
  return {{"samples", s.samples}, {"p50_ms", s.p50_ms}, {"p99_ms", s.p99_ms}};
}

}  // namespace

std::string report_table(const std::vector<run_result>& runs) {
  std::string out =
      "| scenario | seed | requests | completed | errors | lost | dup | diverged | detect ms | "
      "serve again ms | TTFT p50/p99 ms recovery | outside | TPOT p50/p99 ms recovery | outside "
      "| KV pools | result |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    char line[1024];
    std::snprintf(
        line, sizeof line,
        "| %s | %llu | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | "
        "%s |\n",
        r.scenario.c_str(), static_cast<unsigned long long>(r.seed), r.requests, r.completed,
        r.errors, r.lost, r.duplicated, r.diverged, ms_list(r.faults, true).c_str(),
        ms_list(r.faults, false).c_str(), pair_ms(r.ttft_recovery).c_str(),
        pair_ms(r.ttft_outside).c_str(), pair_ms(r.tpot_recovery).c_str(),
        pair_ms(r.tpot_outside).c_str(),
        r.kv_leaks.empty() ? (std::to_string(r.kv_pools_checked) + " ok").c_str() : "LEAK",
        r.ok() ? "pass" : "FAIL");
    out += line;
  }
  return out;
}

nlohmann::json report_json(const std::vector<run_result>& runs) {
  nlohmann::json all = nlohmann::json::array();
  int requests = 0, completed = 0, errors = 0, lost = 0, duplicated = 0, diverged = 0, failed = 0;
  int64_t worst_detect = -1, worst_serve = -1;
  for (const auto& r : runs) {
    nlohmann::json faults = nlohmann::json::array();
    for (const auto& f : r.faults) {
      faults.push_back({{"fault", f.what},
                        {"at_ms", f.at_ms},
                        {"healed_ms", f.healed_ms},
                        {"detected", f.detected},
                        {"detect_ms", f.detect_ms},
                        {"noticed_as", f.noticed_as},
                        {"serve_again_ms", f.serve_again_ms},
                        {"exit_ms", f.exit_ms}});
      worst_detect = std::max(worst_detect, f.detect_ms);
      worst_serve = std::max(worst_serve, f.serve_again_ms);
    }
    all.push_back({{"scenario", r.scenario},
                   {"source", r.source},
                   {"seed", r.seed},
                   {"requests", r.requests},
                   {"completed", r.completed},
                   {"errors", r.errors},
                   {"lost", r.lost},
                   {"duplicated", r.duplicated},
                   {"diverged", r.diverged},
                   {"faults", faults},
                   {"ttft_recovery", latency_json(r.ttft_recovery)},
                   {"ttft_outside", latency_json(r.ttft_outside)},
                   {"tpot_recovery", latency_json(r.tpot_recovery)},
                   {"tpot_outside", latency_json(r.tpot_outside)},
                   {"kv_pools_checked", r.kv_pools_checked},
                   {"kv_leaks", r.kv_leaks},
                   {"memory_growth", r.memory_growth},
                   {"memory_growth_node", r.memory_growth_node},
                   {"duration_ms", r.duration_ms},
                   {"passed", r.ok()},
                   {"failures", r.failures},
                   {"logs", r.logs}});
    requests += r.requests;
    completed += r.completed;
    errors += r.errors;
    lost += r.lost;
    duplicated += r.duplicated;
    diverged += r.diverged;
    failed += r.ok() ? 0 : 1;
  }
  return {{"runs", all},
          {"total",
           {{"runs", runs.size()},
            {"failed_runs", failed},
            {"requests", requests},
            {"completed", completed},
            {"errors", errors},
            {"lost", lost},
            {"duplicated", duplicated},
            {"diverged", diverged},
            {"worst_detect_ms", worst_detect},
            {"worst_serve_again_ms", worst_serve}}}};
}

}  // namespace brigade::chaos

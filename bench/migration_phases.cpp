#include "bench/migration_phases.hpp"

#include <map>

#include "bench/sample_statistics.hpp"

namespace brigade::bench {
namespace {

// The phase of a step that overlaps a window, or "" for one that overlaps none.
std::string phase_during(const timed_step& s,
                         const std::vector<std::pair<double, double>>& windows) {
  for (const auto& [begin, end] : windows) {
    if (s.begin_ms > end || s.end_ms < begin) continue;
    const bool starts = s.begin_ms <= begin;
    const bool ends = s.end_ms >= end;
    if (starts && ends) return "whole";
    if (starts) return "start";
    if (ends) return "switch";
    return "within";
  }
  return "";
}

}  // namespace

std::vector<phase_figure> migration_phases(const std::vector<timed_step>& steps,
                                           const std::vector<std::pair<double, double>>& windows) {
  std::vector<phase_figure> out = {{"start", "the step a migration began in", 0, 0, 0},
                                   {"within", "steps wholly inside a migration", 0, 0, 0},
                                   {"switch", "the step a migration ended in", 0, 0, 0},
                                   {"whole", "a step a migration began and ended in", 0, 0, 0},
                                   {"after", "the first step after a migration", 0, 0, 0},
                                   {"elsewhere", "the other steps outside migrations", 0, 0, 0}};
  std::map<std::string, std::vector<double>> ratios;
  bool previous_during = false;
  for (const timed_step& s : steps) {
    std::string phase = phase_during(s, windows);
    const bool during = !phase.empty();
    if (!during) phase = previous_during ? "after" : "elsewhere";
    ratios[phase].push_back(s.ratio);
    previous_during = during;
  }
  for (phase_figure& p : out) {
    const std::vector<double>& r = ratios[p.name];
    p.steps = static_cast<int>(r.size());
    p.median = quantile(r, 0.5);
    p.p90 = quantile(r, 0.9);
  }
  return out;
}

}  // namespace brigade::bench

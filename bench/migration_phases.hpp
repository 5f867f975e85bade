// Where in a migration its cost falls. A migration starts in one step (the supervisor plans and
// sends every shard its prepare), may span whole steps while experts are copied in, and ends in
// another (the workers switch layouts, the old slots are released). Sorting the steps that way
// shows which part a change should go after: a slow first step is the protocol's fan-out, slow
// steps within are the copies, a slow switch step is the switch.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace brigade::bench {

struct timed_step {
  double begin_ms = 0;
  double end_ms = 0;
  double ratio = 1;  ///< Step time over its local median.
};

struct phase_figure {
  std::string name;  ///< start, within, switch, whole, after, elsewhere
  std::string what;  ///< What the phase's steps are, for a table.
  int steps = 0;
  double median = 0;  ///< Of the ratios; 0 without steps.
  double p90 = 0;
};

/// The steps' ratios sorted by phase: "start" (the step a migration began in), "within" (steps
/// wholly inside one), "switch" (the step one ended in), "whole" (a step it began and ended in),
/// "after" (the first step after one) and "elsewhere" (the other steps outside migrations).
/// `steps` in time order; `windows` are [start, end] in the steps' clock.
std::vector<phase_figure> migration_phases(const std::vector<timed_step>& steps,
                                           const std::vector<std::pair<double, double>>& windows);

}  // namespace brigade::bench

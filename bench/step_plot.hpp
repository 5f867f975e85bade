// A scatter plot of decode step times through a run, as a self-contained SVG: each step over its
// local median against the time it ended, with the migration windows (and the control windows
// between them) shaded behind, and labelled reference lines (the goal, the p99s). One picture
// shows what a table of percentiles cannot: whether the slow steps gather in the migrations or
// are spread over the whole run.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace brigade::bench {

struct plotted_step {
  double end_s = 0;     ///< When the step ended, in seconds from the run's first plotted step.
  double ratio = 1;     ///< Step time over its local median.
  bool during = false;  ///< Overlapped a migration.
};

struct reference_line {
  std::string label;
  double ratio = 1;
};

struct step_plot {
  std::string title;
  std::vector<plotted_step> steps;
  std::vector<std::pair<double, double>> migrations;  ///< [start, end] in seconds, as the steps.
  std::vector<std::pair<double, double>> controls;    ///< Control windows, likewise.
  std::vector<reference_line> lines;
};

/// The plot as a complete SVG document. Steps above the plotted range (at most 3x) are drawn
/// on its top edge, so that none disappears.
std::string step_time_svg(const step_plot& plot);

}  // namespace brigade::bench

// A forecast of the next window's expert loads from the last few, for planning under drift.
//
// A plan made from window w serves window w + 1; when the loads drift, planning from w alone
// places every expert where it was, not where it is going. The forecast fits each expert's share
// of its layer's load over the last `history_windows` windows with a line, newer windows weighing
// more (`recency_decay`), and extrapolates it `horizon_windows` ahead. The slope counts by how far
// it stands clear of its standard error (`trend_z` of them to count nearly in full). The noise
// behind that error is the larger of the expert's own residuals and the layer's median noise per
// unit of share, since a few windows say little about one expert's noise. On a steady load the
// slope is noise, and the forecast falls back to the weighted mean of the windows: an exponential
// average.
//
// The planning load hedges: each expert adds `hedge` times the spread of its share, which is how
// far its windows stray from the line used plus the ramp the trend predicts across the next
// window, and each layer is scaled back to the newest window's total. Replicas go by load per
// replica, so the experts least certain to stay where the forecast puts them get the spare
// replicas, within the slots there are.
//
// A window is whatever the caller observes: a re-plan interval's summed loads, or (as the
// supervisor and `brigade bench balance --forecast` do) each of its sample windows, with options
// restated by per_sample_window. A plan serves a whole interval while the loads drift across it,
// so trajectory() forecasts the loads along it, point by point, for plans that must hold up in
// every window of it rather than on its sum.
#pragma once

#include <deque>
#include <vector>

#include "common/result.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

struct forecast_options {
  /// Windows the forecast looks back over, at most max_history_windows; the oldest is dropped.
  int history_windows = 4;
  /// Weight of a window relative to the next newer one, in (0, 1]: lower follows turns sooner.
  double recency_decay = 0.5;
  /// Standard errors a slope must clear to count: the trend is weighted b^2 / (b^2 + (z se)^2).
  double trend_z = 2.0;
  /// How far ahead to forecast, in windows: 1 is the window after the newest one observed.
  double horizon_windows = 1.0;
  /// Spreads of its load each expert's planning load adds (0: plan from the forecast alone).
  double hedge = 1.0;
};

/// Bound on history_windows: a forecast looks at recent windows, and the history is held in full.
constexpr int max_history_windows = 64;

/// Checks the options' ranges; load_forecast's constructor requires valid options.
status validate_forecast_options(const forecast_options& options);

/// `per_interval`, whose history, decay and horizon count re-plan intervals, for a forecast that
/// observes each of an interval's `windows_per_interval` (at least 1) sample windows instead of
/// their sum: the history holds as many intervals (at most max_history_windows windows), the
/// decay per window compounds to the decay per interval, and the horizon is the middle of the
/// interval `horizon_windows` ahead (at most max_history_windows windows). Trend, noise and
/// spread are then fitted on the windows, so the first interval already shows the drift within it.
forecast_options per_sample_window(const forecast_options& per_interval, int windows_per_interval);

class load_forecast {
 public:
  /// `options` must pass validate_forecast_options.
  explicit load_forecast(const forecast_options& options = {});

  /// Adds the loads of the newest window ([layers][experts], as the planner takes them). The
  /// first window fixes the shape; a window of another shape, or an invalid matrix, is refused
  /// and leaves the history as it was.
  status observe(const load_matrix& window);

  /// Windows held: at most history_windows.
  int windows() const { return static_cast<int>(history_.size()); }

  /// The expected load of the window `horizon_windows` ahead, on the scale of the newest window
  /// (each layer's total equals the newest window's). Empty before the first observe.
  load_matrix expected() const;

  /// The load to plan from: expected() plus the hedge, scaled back to expected()'s layer totals.
  /// Empty before the first observe.
  load_matrix planning_load() const;

  /// The expected loads along the horizons from `from_windows` to `to_windows` ahead (0 <= from
  /// <= to): `points` (at least 1) forecasts at the middles of as many equal parts of that span,
  /// in order, each on expected()'s scale and unhedged. Observing sample windows, (0.5, r + 0.5)
  /// spans the next re-plan interval of r windows: the loads its plan meets window by window,
  /// where expected() gives their middle (see trajectory_polish.hpp). Empty before the first
  /// observe.
  std::vector<load_matrix> trajectory(double from_windows, double to_windows, int points) const;

  /// Forgets every window, for a model or shape that changed.
  void clear() {
    history_.clear();
    layer_totals_.clear();
  }

 private:
  /// One expert's forecast share of its layer and the spread of that share.
  struct expert_forecast {
    double share = 0;
    double spread = 0;
  };
  /// Every expert of a layer; needs at least two windows.
  std::vector<expert_forecast> forecast_layer(int layer, double horizon) const;
  /// Every layer's forecast `horizon` windows after the newest, on the newest window's scale.
  load_matrix forecast(double horizon, bool hedged) const;

  forecast_options options_;
  /// Newest last; each window's row per layer, and that row's total.
  std::deque<load_matrix> history_;
  std::deque<std::vector<double>> layer_totals_;
};

}  // namespace brigade::eplb

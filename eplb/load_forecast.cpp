#include "eplb/load_forecast.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>
#include <utility>

namespace brigade::eplb {

status validate_forecast_options(const forecast_options& o) {
  if (o.history_windows < 1 || o.history_windows > max_history_windows) {
    return error(errc::invalid_argument,
                 "history_windows must be between 1 and " + std::to_string(max_history_windows));
  }
  if (!(o.recency_decay > 0 && o.recency_decay <= 1)) {
    return error(errc::invalid_argument, "recency_decay must be in (0, 1]");
  }
  if (!(o.trend_z >= 0 && std::isfinite(o.trend_z))) {
    return error(errc::invalid_argument, "trend_z must be a finite number of at least 0");
  }
  if (!(o.horizon_windows >= 0 && o.horizon_windows <= max_history_windows)) {
    return error(errc::invalid_argument,
                 "horizon_windows must be between 0 and " + std::to_string(max_history_windows));
  }
  if (!(o.hedge >= 0 && std::isfinite(o.hedge))) {
    return error(errc::invalid_argument, "hedge must be a finite number of at least 0");
  }
  return ok_status();
}

load_forecast::load_forecast(const forecast_options& options) : options_(options) {
  assert(validate_forecast_options(options));
}

status load_forecast::observe(const load_matrix& window) {
  if (status s = validate_load_matrix(window); !s) return s;
  if (!history_.empty()) {
    const load_matrix& newest = history_.back();
    if (window.size() != newest.size() || window.front().size() != newest.front().size()) {
      return error(errc::invalid_argument,
                   "window has " + std::to_string(window.size()) + " layers of " +
                       std::to_string(window.front().size()) + " experts; the forecast holds " +
                       std::to_string(newest.size()) + " of " +
                       std::to_string(newest.front().size()));
    }
  }
  std::vector<double> totals;
  for (const auto& row : window) {
    double total = 0;
    for (double x : row)
      total += x;
    totals.push_back(total);
  }
  history_.push_back(window);
  layer_totals_.push_back(std::move(totals));
  while (static_cast<int>(history_.size()) > options_.history_windows) {
    history_.pop_front();
    layer_totals_.pop_front();
  }
  assert(history_.size() == layer_totals_.size());
  return ok_status();
}

namespace {

/// The weighted abscissae of the history: window t at x = t, the newest at n - 1, with weight
/// decay^(n - 1 - t). The same for every expert.
struct window_weights {
  std::vector<double> weight;
  double sum = 0;
  double x_mean = 0;
  double sxx = 0;   ///< sum of w (x - x_mean)^2
  double w2xx = 0;  ///< sum of w^2 (x - x_mean)^2: with sxx, the variance of a fitted slope

  window_weights(int n, double decay) : weight(n) {
    for (int t = 0; t < n; ++t) {
      weight[t] = std::pow(decay, n - 1 - t);
      sum += weight[t];
      x_mean += weight[t] * t;
    }
    x_mean /= sum;
    for (int t = 0; t < n; ++t) {
      sxx += weight[t] * (t - x_mean) * (t - x_mean);
      w2xx += weight[t] * weight[t] * (t - x_mean) * (t - x_mean);
    }
  }
};

/// A weighted least-squares line through one expert's shares.
struct line_fit {
  double level = 0;        ///< The weighted mean share, at x_mean.
  double slope = 0;        ///< Share per window.
  double residual_sq = 0;  ///< sum of w r^2 about the line
};

line_fit fit_line(const std::vector<double>& share, const window_weights& w) {
  line_fit f;
  const int n = static_cast<int>(share.size());
  for (int t = 0; t < n; ++t)
    f.level += w.weight[t] * share[t];
  f.level /= w.sum;
  if (n < 2) return f;
  double sxy = 0;
  for (int t = 0; t < n; ++t)
    sxy += w.weight[t] * (t - w.x_mean) * (share[t] - f.level);
  f.slope = sxy / w.sxx;
  for (int t = 0; t < n; ++t) {
    const double r = share[t] - f.level - f.slope * (t - w.x_mean);
    f.residual_sq += w.weight[t] * r * r;
  }
  return f;
}

/// The noise of a share per unit of share, pooled over the layer's experts: counts vary about
/// in proportion to their mean, and one expert's few residuals say little about its noise. The
/// median, so that a few experts turning do not count as noise for all.
double pooled_noise_per_share(const std::vector<line_fit>& fits, int n, double weight_sum) {
  std::vector<double> ratios;
  for (const line_fit& f : fits) {
    if (f.level > 0) ratios.push_back(f.residual_sq / weight_sum * n / (n - 2) / f.level);
  }
  if (ratios.empty()) return 0;
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  return ratios[ratios.size() / 2];
}

}  // namespace

// Shares rather than tokens, so that a change in traffic as a whole is not taken for a trend of
// every expert.
std::vector<load_forecast::expert_forecast> load_forecast::forecast_layer(int layer,
                                                                          double horizon) const {
  const int n = windows();
  const int experts = static_cast<int>(history_.back()[layer].size());
  const window_weights w(n, options_.recency_decay);
  std::vector<line_fit> fits(experts);
  std::vector<double> share(n);
  for (int e = 0; e < experts; ++e) {
    for (int t = 0; t < n; ++t) {
      const double total = layer_totals_[t][layer];
      share[t] = total > 0 ? history_[t][layer][e] / total : 0.0;
    }
    fits[e] = fit_line(share, w);
  }
  // A slope counts by how far it stands clear of its standard error, which takes a third window
  // to estimate: b^2 / (b^2 + (z se)^2).
  const double pooled = n >= 3 ? pooled_noise_per_share(fits, n, w.sum) : 0.0;
  const double z = options_.trend_z;
  std::vector<expert_forecast> out(experts);
  for (int e = 0; e < experts; ++e) {
    const line_fit& f = fits[e];
    double trend_weight = 0;
    if (n >= 3 && f.slope != 0) {
      const double own = f.residual_sq / w.sum * n / (n - 2);
      const double noise_sq = std::max(own, pooled * f.level);
      const double slope_var = noise_sq * w.w2xx / (w.sxx * w.sxx);
      trend_weight = f.slope * f.slope / (f.slope * f.slope + z * z * slope_var);
    }
    const double trend = trend_weight * f.slope;
    out[e].share = std::max(0.0, f.level + trend * (n - 1 + horizon - w.x_mean));
    if (n >= 2) {
      // About the line actually used: the residuals plus the part of the slope left out (the
      // cross term vanishes for a least-squares line). A window's load also ramps by the trend
      // across it, a uniform spread of trend^2 / 12.
      const double unexplained = f.residual_sq + (f.slope - trend) * (f.slope - trend) * w.sxx;
      out[e].spread = std::sqrt(unexplained / w.sum * n / (n - 1) + trend * trend / 12);
    }
  }
  return out;
}

load_matrix load_forecast::forecast(double horizon, bool hedged) const {
  if (history_.empty()) return {};
  // One window has no trend and no spread: it forecasts itself, exactly, rather than rescaled.
  if (history_.size() == 1) return history_.back();
  assert(history_.size() == layer_totals_.size());
  const load_matrix& newest = history_.back();
  load_matrix out(newest.size(), std::vector<double>(newest.front().size()));
  for (size_t layer = 0; layer < newest.size(); ++layer) {
    const std::vector<expert_forecast> f = forecast_layer(static_cast<int>(layer), horizon);
    double planned_sum = 0;
    for (size_t e = 0; e < f.size(); ++e) {
      out[layer][e] = f[e].share + (hedged ? options_.hedge * f[e].spread : 0.0);
      planned_sum += out[layer][e];
    }
    // Back to the newest window's total; the shares of the forecast need not sum to one.
    const double scale = planned_sum > 0 ? layer_totals_.back()[layer] / planned_sum : 0.0;
    for (double& x : out[layer])
      x *= scale;
  }
  return out;
}

load_matrix load_forecast::expected() const {
  return forecast(options_.horizon_windows, false);
}

load_matrix load_forecast::planning_load() const {
  return forecast(options_.horizon_windows, true);
}

std::vector<load_matrix> load_forecast::trajectory(double from_windows, double to_windows,
                                                   int points) const {
  assert(points >= 1 && 0 <= from_windows && from_windows <= to_windows);
  std::vector<load_matrix> out;
  if (history_.empty()) return out;
  for (int i = 0; i < points; ++i)
    out.push_back(forecast(from_windows + (to_windows - from_windows) * (i + 0.5) / points, false));
  return out;
}

forecast_options per_sample_window(const forecast_options& per_interval, int windows_per_interval) {
  assert(windows_per_interval >= 1);
  const int r = windows_per_interval;
  forecast_options o = per_interval;
  o.history_windows = static_cast<int>(
      std::min<long long>(max_history_windows, 1LL * per_interval.history_windows * r));
  o.recency_decay = std::pow(per_interval.recency_decay, 1.0 / r);
  // Interval h ahead holds the windows (h - 1) r + 1 ... h r after the newest: its middle.
  o.horizon_windows =
      std::min<double>(max_history_windows, (per_interval.horizon_windows - 1) * r + (r + 1) / 2.0);
  o.horizon_windows = std::max(0.0, o.horizon_windows);
  return o;
}

}  // namespace brigade::eplb

// The pure part of `brigade top`: what one poll of a server gave (its JSON), drawn as the lines
// of one frame. No I/O here, so tests render frames from JSON they write themselves; the
// terminal (escapes, size, keys) is cli/cmd_top.cpp's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brigade::cli {

/// What the last poll of the server gave; null JSON where nothing came yet.
struct top_snapshot {
  /// The server polled, for the title line.
  std::string url;
  /// The frame's number, from 1.
  int64_t frame = 0;
  /// How often top polls, for the title line and the retry notice.
  int64_t interval_ms = 1000;
  /// GET /v1/status: an array with one object per role (deploy/status_json.cpp).
  nlohmann::json status;
  /// GET /v1/experts: layout, windows, balancedness, migration; null without expert shards.
  nlohmann::json experts;
  /// The last events of GET /v1/events, oldest first.
  std::vector<nlohmann::json> events;
  /// What failed in this poll and what to do about it; empty when the poll worked.
  std::string error;
  /// What fails on the event stream; empty while it works.
  std::string events_error;
};

/// The size of the frame in character cells.
struct frame_size {
  int columns = 80;
  int rows = 24;
};

/// Mean step time per role. The server reports only each role's last step time (and the decode
/// workers their total), so every poll where a role's step count moved adds a sample.
class step_means {
 public:
  /// Roles tracked at most; a role seen past that has no mean.
  static constexpr size_t max_roles = 1024;

  /// Takes the samples of one GET /v1/status answer.
  void observe(const nlohmann::json& status);
  /// The mean step time in ms of `role` (one entry of GET /v1/status): the server's own mean
  /// where it reports a total (decode), else the mean of the samples; negative before the first.
  double mean_ms(const nlohmann::json& role) const;

 private:
  struct samples {
    int64_t steps = -1;
    double sum_ms = 0;
    int64_t count = 0;
  };
  std::map<std::string, samples> by_name_;
};

/// The frame: at most size.rows lines, none wider than size.columns cells.
std::vector<std::string> render_top(const top_snapshot& snapshot, const step_means& means,
                                    frame_size size);

/// A horizontal bar of `cells` cells for value out of max, in eighths of a block, with a mark
/// at cell `mean_cell` where the bar leaves it empty (a negative cell marks nothing).
std::string load_bar(double value, double max, int cells, int mean_cell);

/// One block per value, ▁ for 0 up to █ for 1 (values are clamped to [0, 1]).
std::string sparkline(const std::vector<double>& values);

/// How many terminal cells `text` takes: one per code point (brigade draws no wide glyphs).
size_t display_width(const std::string& text);

/// `text` cut to at most `columns` cells, ending in … when cut.
std::string fit(const std::string& text, size_t columns);

}  // namespace brigade::cli

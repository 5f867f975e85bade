#include "bench/step_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

namespace brigade::bench {
namespace {

constexpr double width = 960, height = 400;
constexpr double left = 64, right = 150, top = 44, bottom = 48;  // margins: axes, labels
constexpr double ratio_floor = 0.5, ratio_ceiling = 3.0;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string ratio_label(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A tick spacing of 1, 2 or 5 times a power of ten giving at most `most` intervals over `span`.
double tick_step(double span, int most) {
  const double raw = span / most;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

struct frame {
  double t_max = 1;                                   // seconds at the right edge
  double y_min = ratio_floor, y_max = ratio_ceiling;  // ratios at the bottom and top edges
  double x(double t) const { return left + (width - left - right) * t / t_max; }
  double y(double r) const {
    const double clamped = std::clamp(r, y_min, y_max);
    return top + (height - top - bottom) * (y_max - clamped) / (y_max - y_min);
  }
};

// The ranges: time to the last step or window; ratios from below the lowest step to above the
// highest step or line, in quarters, within [ratio_floor, ratio_ceiling].
frame frame_of(const step_plot& p) {
  frame f;
  double t = 0, lo = 1, hi = 1.5;
  for (const plotted_step& s : p.steps) {
    t = std::max(t, s.end_s);
    lo = std::min(lo, s.ratio);
    hi = std::max(hi, s.ratio);
  }
  for (const auto* windows : {&p.migrations, &p.controls}) {
    for (const auto& w : *windows)
      t = std::max(t, w.second);
  }
  for (const reference_line& l : p.lines)
    hi = std::max(hi, l.ratio);
  f.t_max = t > 0 ? t : 1;
  f.y_min = std::max(ratio_floor, std::floor(lo * 4 - 0.5) / 4);
  f.y_max = std::min(ratio_ceiling, std::ceil(hi * 4 + 0.5) / 4);
  return f;
}

void add_windows(std::string& svg, const frame& f,
                 const std::vector<std::pair<double, double>>& windows, const char* kind) {
  for (const auto& [start, end] : windows) {
    const double x0 = f.x(std::max(0.0, start)), x1 = f.x(std::min(f.t_max, end));
    svg += "<rect class=\"" + std::string(kind) + "\" x=\"" + num(x0) + "\" y=\"" + num(top) +
           "\" width=\"" + num(std::max(1.0, x1 - x0)) + "\" height=\"" +
           num(height - top - bottom) + "\"/>\n";
  }
}

void add_axes(std::string& svg, const frame& f) {
  const double x0 = left, x1 = width - right, y0 = height - bottom;
  svg += "<g class=\"axis\">\n";
  svg += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(x1) + "\" y2=\"" +
         num(y0) + "\"/><line x1=\"" + num(x0) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x0) +
         "\" y2=\"" + num(y0) + "\"/>\n";
  const double dt = tick_step(f.t_max, 10);
  for (double t = 0; t <= f.t_max + 1e-9; t += dt) {
    svg += "<text x=\"" + num(f.x(t)) + "\" y=\"" + num(y0 + 16) + "\" text-anchor=\"middle\">" +
           num(t) + "</text>\n";
  }
  for (double r = f.y_min; r <= f.y_max + 1e-9; r += 0.25) {
    svg += "<text x=\"" + num(x0 - 6) + "\" y=\"" + num(f.y(r) + 4) + "\" text-anchor=\"end\">" +
           ratio_label(r) + "</text>\n";
  }
  svg += "<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num(height - 10) +
         "\" text-anchor=\"middle\">seconds</text>\n";
  svg += "<text transform=\"rotate(-90)\" x=\"" + num(-(top + y0) / 2) +
         "\" y=\"16\" text-anchor=\"middle\">step time over its local median</text>\n</g>\n";
}

// Each label sits beside its line, but never closer than a line of text to the one above it:
// p99 during and p99 outside are often within a pixel or two of each other.
std::vector<double> label_baselines(const frame& f, const std::vector<reference_line>& lines) {
  constexpr double text_height = 14;
  std::vector<size_t> order(lines.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return lines[a].ratio > lines[b].ratio; });  // top first
  std::vector<double> y(lines.size());
  double previous = -text_height;
  for (size_t i : order) {
    y[i] = std::max(f.y(lines[i].ratio) + 4, previous + text_height);
    previous = y[i];
  }
  return y;
}

void add_lines(std::string& svg, const frame& f, const std::vector<reference_line>& lines) {
  const std::vector<double> label_y = label_baselines(f, lines);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string y = num(f.y(lines[i].ratio));
    svg += "<line class=\"reference\" x1=\"" + num(left) + "\" y1=\"" + y + "\" x2=\"" +
           num(width - right) + "\" y2=\"" + y + "\"/><text class=\"reference\" x=\"" +
           num(width - right + 6) + "\" y=\"" + num(label_y[i]) + "\">" +
           xml_escaped(lines[i].label) + "</text>\n";
  }
}

void add_steps(std::string& svg, const frame& f, const std::vector<plotted_step>& steps) {
  for (const plotted_step& s : steps) {
    svg += "<circle class=\"" + std::string(s.during ? "step during" : "step") + "\" cx=\"" +
           num(f.x(s.end_s)) + "\" cy=\"" + num(f.y(s.ratio)) + "\" r=\"2\"/>\n";
  }
}

const char* style =
    "<style>text{font:12px sans-serif;fill:#333}.axis line{stroke:#333}"
    ".migration{fill:#f4a261;opacity:.35}.control{fill:#adb5bd;opacity:.3}"
    ".step{fill:#2a6f97}.step.during{fill:#d62828}"
    "line.reference{stroke:#555;stroke-dasharray:4 3}</style>\n";

}  // namespace

std::string step_time_svg(const step_plot& plot) {
  const frame f = frame_of(plot);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
                    "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " +
                    num(height) + "\">\n";
  svg += style;
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(left) + "\" y=\"18\" font-weight=\"bold\">" + xml_escaped(plot.title) +
         "</text>\n";
  svg += "<text x=\"" + num(left) +
         "\" y=\"34\">red: steps overlapping a migration (shaded "
         "orange); blue: the others; grey: control windows</text>\n";
  add_windows(svg, f, plot.migrations, "migration");
  add_windows(svg, f, plot.controls, "control");
  add_axes(svg, f);
  add_lines(svg, f, plot.lines);
  add_steps(svg, f, plot.steps);
  if (plot.steps.empty()) {
    svg += "<text x=\"" + num(width / 2) + "\" y=\"" + num(height / 2) +
           "\" text-anchor=\"middle\">no steps were timed</text>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace brigade::bench

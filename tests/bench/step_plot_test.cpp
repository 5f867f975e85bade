#include "bench/step_plot.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/text.hpp"

using namespace brigade::bench;
using brigade::testing::count_of;

namespace {

struct drawn_step {
  bool during = false;
  double x = 0, y = 0;
};

std::vector<drawn_step> circles_of(const std::string& svg) {
  static const std::regex circle(
      R"re(<circle class="step( during)?" cx="([-0-9.]+)" cy="([-0-9.]+)")re");
  std::vector<drawn_step> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator();
       ++it) {
    out.push_back({(*it)[1].matched, std::stod((*it)[2]), std::stod((*it)[3])});
  }
  return out;
}

step_plot sample_run() {
  step_plot p;
  p.title = "one process";
  for (int i = 0; i < 100; ++i) {
    const double t = 0.02 * (i + 1);
    const bool during = t >= 0.5 && t <= 0.6;
    p.steps.push_back({t, 1.0 + 0.001 * (i % 7), during});
  }
  p.migrations = {{0.5, 0.6}, {1.5, 1.55}};
  p.controls = {{1.0, 1.1}};
  p.lines = {{"goal 1.05x", 1.05}, {"p99 outside 1.40x", 1.4}};
  return p;
}

}  // namespace

TEST_CASE("every step is drawn once, marked by whether it overlapped a migration") {
  const step_plot p = sample_run();
  const auto drawn = circles_of(step_time_svg(p));
  REQUIRE(drawn.size() == p.steps.size());
  for (size_t i = 0; i < drawn.size(); ++i)
    CHECK(drawn[i].during == p.steps[i].during);
}

TEST_CASE("each window and reference line is drawn, the document is one closed svg") {
  const step_plot p = sample_run();
  const std::string svg = step_time_svg(p);
  CHECK(count_of(svg, "<rect class=\"migration\"") == 2);
  CHECK(count_of(svg, "<rect class=\"control\"") == 1);
  CHECK(count_of(svg, "<line class=\"reference\"") == 2);
  CHECK(count_of(svg, "goal 1.05x") == 1);
  CHECK(count_of(svg, "<svg ") == 1);
  CHECK(svg.rfind("</svg>\n") == svg.size() - 7);
}

TEST_CASE(
    "labels of lines that nearly coincide are set a line of text apart, in the lines' order") {
  step_plot p = sample_run();
  p.lines = {{"p99 outside 1.30x", 1.30}, {"goal 1.05x", 1.05}, {"p99 during 1.31x", 1.31}};
  const std::string svg = step_time_svg(p);
  static const std::regex label(
      R"re(<text class="reference" x="[-0-9.]+" y="([-0-9.]+)">([^<]*))re");
  std::map<std::string, double> y;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator();
       ++it) {
    y[(*it)[2]] = std::stod((*it)[1]);
  }
  REQUIRE(y.size() == 3);
  CHECK(y["p99 during 1.31x"] + 14 <= y["p99 outside 1.30x"] + 1e-9);  // higher ratio above
  CHECK(y["p99 outside 1.30x"] < y["goal 1.05x"]);
  // A label far from the others stays beside its own line (lines are drawn in the given order).
  static const std::regex line(R"re(<line class="reference" x1="[-0-9.]+" y1="([-0-9.]+)")re");
  std::vector<double> line_y;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator();
       ++it) {
    line_y.push_back(std::stod((*it)[1]));
  }
  REQUIRE(line_y.size() == 3);
  CHECK(y["goal 1.05x"] == Approx(line_y[1] + 4));
  CHECK(y["p99 during 1.31x"] == Approx(line_y[2] + 4));
}

TEST_CASE("later steps lie further right and slower steps higher, all inside the plot") {
  step_plot p;
  p.steps = {{0.1, 1.0, false}, {0.2, 1.3, true}, {0.3, 0.9, false}};
  const auto drawn = circles_of(step_time_svg(p));
  REQUIRE(drawn.size() == 3);
  CHECK(drawn[0].x < drawn[1].x);
  CHECK(drawn[1].x < drawn[2].x);
  CHECK(drawn[1].y < drawn[0].y);  // SVG's y grows downwards
  CHECK(drawn[0].y < drawn[2].y);
  for (const drawn_step& d : drawn) {
    CHECK(d.x >= 0);
    CHECK(d.x <= 960);
    CHECK(d.y >= 0);
    CHECK(d.y <= 400);
  }
}

TEST_CASE("a step far above the range is drawn on the top edge, not dropped") {
  step_plot p;
  p.steps = {{0.1, 1.0, false}, {0.2, 40.0, false}, {0.3, 2.9, false}};
  const auto drawn = circles_of(step_time_svg(p));
  REQUIRE(drawn.size() == 3);
  CHECK(drawn[1].y >= 0);
  CHECK(drawn[1].y <= drawn[2].y);
}

TEST_CASE("text is escaped, and a run without steps still gives a document that says so") {
  step_plot p;
  p.title = "a <b> & \"c\"";
  const std::string svg = step_time_svg(p);
  CHECK(svg.find("a &lt;b&gt; &amp; &quot;c&quot;") != std::string::npos);
  CHECK(svg.find("<b>") == std::string::npos);
  CHECK(svg.find("no steps were timed") != std::string::npos);
  CHECK(circles_of(svg).empty());
}

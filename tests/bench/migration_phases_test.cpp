// Sorting steps by where in a migration they fall.
#include "bench/migration_phases.hpp"

#include <catch2/catch.hpp>

using namespace brigade::bench;

namespace {

const phase_figure& phase(const std::vector<phase_figure>& all, const std::string& name) {
  for (const auto& p : all) {
    if (p.name == name) return p;
  }
  FAIL("no phase " << name);
  return all.front();
}

}  // namespace

TEST_CASE("steps are sorted by the part of a migration they overlap", "[bench]") {
  // Steps of 10 ms from 0 to 120 ms. One migration from 15 to 42 ms: it starts in the step
  // [10, 20], fills [20, 30] and [30, 40], ends in [40, 50]; [50, 60] is the step after. Another
  // from 83 to 87 ms lies inside the step [80, 90], and [90, 100] comes after it.
  std::vector<timed_step> steps;
  for (int i = 0; i < 12; ++i)
    steps.push_back({10.0 * i, 10.0 * (i + 1), 1.0 + 0.01 * i});
  const auto phases = migration_phases(steps, {{15, 42}, {83, 87}});
  CHECK(phase(phases, "start").steps == 1);
  CHECK(phase(phases, "start").median == Approx(1.01));
  CHECK(phase(phases, "within").steps == 2);
  CHECK(phase(phases, "switch").steps == 1);
  CHECK(phase(phases, "switch").median == Approx(1.04));
  CHECK(phase(phases, "whole").steps == 1);
  CHECK(phase(phases, "whole").median == Approx(1.08));
  CHECK(phase(phases, "after").steps == 2);
  CHECK(phase(phases, "elsewhere").steps == 5);  // 0, 6, 7, 10 and 11
  int total = 0;
  for (const auto& p : phases)
    total += p.steps;
  CHECK(total == 12);
}

TEST_CASE("without migrations every step is elsewhere", "[bench]") {
  const auto phases = migration_phases({{0, 10, 1.0}, {10, 20, 1.2}}, {});
  CHECK(phase(phases, "elsewhere").steps == 2);
  CHECK(phase(phases, "start").steps == 0);
  CHECK(phase(phases, "start").median == 0);
}

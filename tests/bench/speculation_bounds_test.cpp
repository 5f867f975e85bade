// The bounds `bench speculation` prints beside each row: the best speedup the measured acceptance
// and costs allow, with the draft's forwards free or charged as a step runs them.
#include "bench/speculation_bounds.hpp"

#include <catch2/catch.hpp>

using brigade::bench::bound_costs;
using brigade::bench::fixed_length_bound;

TEST_CASE("a step's draft forwards cost its first cold and the rest warm", "[bench][bounds]") {
  bound_costs c;
  c.verify = {0.2, 0.3};
  c.first_draft = 0.04;
  c.draft = 0.02;
  // Five forwards in two steps: two first ones, three next ones, over a 0.2 plain step.
  CHECK(c.draft_units(5, 2) == Approx((2 * 0.04 + 3 * 0.02) / 0.2));
  // A step without a forward costs none; more steps than forwards charge each forward cold.
  CHECK(c.draft_units(0, 3) == 0.0);
  CHECK(c.draft_units(2, 3) == Approx(2 * 0.04 / 0.2));
}

TEST_CASE("the fixed-length bound takes the best length's tokens over its cost",
          "[bench][bounds]") {
  bound_costs c;
  c.verify = {1.0, 1.5, 2.0};  // plain, one draft, two drafts
  c.first_draft = 0.5;
  c.draft = 0.25;
  const std::vector<double> every{1.0, 1.0};
  // Drafting free: length 1 gives 2 tokens for 1.5, length 2 three for 2.0.
  CHECK(fixed_length_bound(every, c, false) == Approx(1.5));
  // Counted: length 1 pays one cold forward (2 / 2.0), length 2 a cold and a warm (3 / 2.75).
  CHECK(fixed_length_bound(every, c, true) == Approx(3.0 / 2.75));
  // Half the first drafts kept and none after: length 1 (1.5 tokens) is the best.
  CHECK(fixed_length_bound({0.5, 0.0}, c, false) == Approx(1.5 / 1.5));
  CHECK(fixed_length_bound({0.8, 0.0}, c, false) == Approx(1.8 / 1.5));
  // Never below plain decoding, and no longer than the costs measured.
  CHECK(fixed_length_bound({0.0, 0.0}, c, true) == 1.0);
  CHECK(fixed_length_bound({1.0, 1.0, 1.0, 1.0}, c, false) == Approx(1.5));
}

// The phi accrual suspicion measure: silence grows suspicion, steady heartbeats keep it low,
// jitter makes the same silence less suspicious, and a reset forgets the past.
#include <catch2/catch.hpp>

#include "cluster/failure_detector.hpp"

using brigade::cluster::failure_detector;
using brigade::cluster::failure_detector_options;

namespace {

failure_detector steady_peer(double interval_ms, double jitter_ms, int beats) {
  failure_detector_options o;
  o.expected_interval_ms = interval_ms;
  o.min_std_ms = 10;
  o.acceptable_pause_ms = 0;
  failure_detector d(o);
  double t = 0;
  for (int i = 0; i < beats; ++i) {
    d.heartbeat(t);
    t += interval_ms + ((i % 2) ? jitter_ms : -jitter_ms);
  }
  return d;
}

}  // namespace

TEST_CASE("a peer heard from on time is not suspected, a silent one ever more", "[cluster]") {
  failure_detector d = steady_peer(200, 0, 50);
  const double last = 49 * 200;
  CHECK(d.phi(last) == Approx(0).margin(0.5));
  CHECK(d.phi(last + 200) < 1);
  const double later = d.phi(last + 400);
  const double much_later = d.phi(last + 2000);
  CHECK(later > d.phi(last + 200));
  CHECK(much_later > later);
  CHECK(much_later > 8);
  CHECK(d.silence_ms(last + 2000) == Approx(2000));
}

TEST_CASE("the same silence is less suspicious from a peer whose heartbeats jitter", "[cluster]") {
  failure_detector calm = steady_peer(200, 0, 60);
  failure_detector jittery = steady_peer(200, 80, 60);
  const double silence = 450;
  CHECK(jittery.std_interval_ms() > calm.std_interval_ms());
  CHECK(jittery.phi(jittery.mean_interval_ms() * 0 + 59 * 200 + silence) <
        calm.phi(59 * 200 + silence));
}

TEST_CASE("an acceptable pause costs no suspicion, and a reset forgets the history", "[cluster]") {
  failure_detector_options o;
  o.expected_interval_ms = 200;
  o.min_std_ms = 50;
  o.acceptable_pause_ms = 1000;
  failure_detector d(o);
  for (int i = 0; i < 20; ++i)
    d.heartbeat(i * 200.0);
  CHECK(d.phi(19 * 200.0 + 1000) < 1);
  CHECK(d.phi(19 * 200.0 + 3000) > 8);
  // Far beyond double precision of the tail: the asymptote keeps it finite and growing.
  CHECK(d.phi(19 * 200.0 + 60000) > d.phi(19 * 200.0 + 30000));
  d.reset();
  CHECK(d.phi(1e9) == 0);
  CHECK(d.silence_ms(1e9) == 0);
}

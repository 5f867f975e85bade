// Suspicion of a peer from the arrival times of its heartbeats: the phi accrual failure detector
// (Hayashibara et al., 2004), in the form that tolerates a pause of known length.
//
// phi is -log10 of the probability that a heartbeat arrives even later than now, given the
// intervals seen so far (a normal distribution of mean + acceptable pause, with at least
// min_std_ms of spread). phi 1 means a 10% chance that the peer is merely slow, phi 8 one in a
// hundred million. Unlike a fixed timeout, it adapts to a peer whose heartbeats jitter: the same
// silence is more suspicious from a peer that always answered on time.
//
//   alive --phi >= suspect_phi--> suspected --heartbeat--> alive
//     (the caller declares the peer dead by other means: its connection closing, or a longer
//      silence than dead_after; the detector only measures)
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace brigade::cluster {

struct failure_detector_options {
  double expected_interval_ms = 200;  ///< Heartbeat period, assumed until intervals are seen.
  double min_std_ms = 100;            ///< Spread assumed at least, so a steady peer is not
                                      ///< suspected after one late heartbeat.
  double acceptable_pause_ms = 500;   ///< Added to the mean: hiccups this long cost nothing.
  std::size_t window = 100;           ///< Intervals remembered.
};

class failure_detector {
 public:
  explicit failure_detector(failure_detector_options options = {});

  /// A heartbeat arrived at `now_ms` (any monotonic clock, in milliseconds).
  void heartbeat(double now_ms);
  /// The suspicion level at `now_ms`; 0 before the first heartbeat.
  double phi(double now_ms) const;
  /// Milliseconds since the last heartbeat (0 before the first).
  double silence_ms(double now_ms) const;
  /// Forgets the history (the peer restarted or reconnected).
  void reset();

  double mean_interval_ms() const;
  double std_interval_ms() const;

 private:
  failure_detector_options options_;
  std::deque<double> intervals_;
  double sum_ = 0;
  double sum_squares_ = 0;
  double last_ms_ = -1;
};

}  // namespace brigade::cluster

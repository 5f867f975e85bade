#include "cluster/failure_detector.hpp"

#include <algorithm>
#include <cmath>

namespace brigade::cluster {

failure_detector::failure_detector(failure_detector_options options) : options_(options) {}

void failure_detector::heartbeat(double now_ms) {
  if (last_ms_ >= 0 && now_ms >= last_ms_) {
    const double interval = now_ms - last_ms_;
    intervals_.push_back(interval);
    sum_ += interval;
    sum_squares_ += interval * interval;
    if (intervals_.size() > options_.window) {
      const double old = intervals_.front();
      intervals_.pop_front();
      sum_ -= old;
      sum_squares_ -= old * old;
    }
  }
  last_ms_ = std::max(last_ms_, now_ms);
}

double failure_detector::mean_interval_ms() const {
  return intervals_.empty() ? options_.expected_interval_ms
                            : sum_ / static_cast<double>(intervals_.size());
}

double failure_detector::std_interval_ms() const {
  if (intervals_.size() < 2) return options_.min_std_ms;
  const double n = static_cast<double>(intervals_.size());
  const double mean = sum_ / n;
  const double variance = std::max(0.0, sum_squares_ / n - mean * mean);
  return std::max(options_.min_std_ms, std::sqrt(variance));
}

double failure_detector::silence_ms(double now_ms) const {
  return last_ms_ < 0 ? 0 : std::max(0.0, now_ms - last_ms_);
}

double failure_detector::phi(double now_ms) const {
  if (last_ms_ < 0) return 0;
  const double mean = mean_interval_ms() + options_.acceptable_pause_ms;
  const double z = (silence_ms(now_ms) - mean) / std_interval_ms();
  // P(a later arrival) = 1 - CDF(z) = erfc(z / sqrt 2) / 2. For large z erfc underflows to 0;
  // its logarithm then follows the asymptote log(erfc(x)) ~ -x^2 - log(x sqrt(pi)).
  const double x = z / std::sqrt(2.0);
  const double later = 0.5 * std::erfc(x);
  if (later > 1e-300) return -std::log10(later);
  const double log_e = -x * x - std::log(x * std::sqrt(M_PI)) - std::log(2.0);
  return -log_e / std::log(10.0);
}

void failure_detector::reset() {
  intervals_.clear();
  sum_ = sum_squares_ = 0;
  last_ms_ = -1;
}

}  // namespace brigade::cluster

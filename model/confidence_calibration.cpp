#include "model/confidence_calibration.hpp"

#include <algorithm>
#include <cstdio>

namespace brigade::model {
namespace {

// A status from a peer may carry buckets of another size: only the first `buckets` count.
size_t common_size(const confidence_calibration& c) {
  return std::min({c.drafts.size(), c.predicted.size(), c.kept.size(),
                   static_cast<size_t>(confidence_calibration::buckets)});
}

}  // namespace

int confidence_calibration::bucket_of(double p) {
  if (!(p > 0.0)) return 0;  // 0 and below (and a NaN) fall in the first bucket
  return std::min(buckets - 1, static_cast<int>(p * buckets));
}

std::string confidence_calibration::bucket_name(int b) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f-%.1f", static_cast<double>(b) / buckets,
                static_cast<double>(b + 1) / buckets);
  return text;
}

void confidence_calibration::add(double p, bool was_kept) {
  drafts.resize(buckets, 0);
  predicted.resize(buckets, 0.0);
  kept.resize(buckets, 0);
  const auto b = static_cast<size_t>(bucket_of(p));
  drafts[b] += 1;
  predicted[b] += p;
  kept[b] += was_kept ? 1 : 0;
}

void confidence_calibration::merge(const confidence_calibration& other) {
  drafts.resize(buckets, 0);
  predicted.resize(buckets, 0.0);
  kept.resize(buckets, 0);
  for (size_t b = 0; b < common_size(other); ++b) {
    drafts[b] += other.drafts[b];
    predicted[b] += other.predicted[b];
    kept[b] += other.kept[b];
  }
}

int64_t confidence_calibration::total() const {
  int64_t n = 0;
  for (int64_t d : drafts)
    n += d;
  return n;
}

}  // namespace brigade::model

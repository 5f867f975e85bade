// How well a confidence head (model/confidence_head.hpp) predicts: its predictions against what
// verification then found, in ten buckets of the predicted probability. A decoder records one
// event per draft whose outcome verification observed; per bucket it keeps the drafts, the sum of
// their predictions and those kept, so that the mean prediction beside the observed acceptance
// says whether the head is too hopeful or too timid there. Sums over decoders add bucket by
// bucket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::model {

struct confidence_calibration {
  static constexpr int buckets = 10;

  /// Per bucket of the prediction (bucket b holds [b/10, (b+1)/10); 1.0 falls in the last):
  /// drafts with an observed outcome, the sum of their predictions, and those the target kept.
  std::vector<int64_t> drafts = std::vector<int64_t>(buckets, 0);
  std::vector<double> predicted = std::vector<double>(buckets, 0.0);
  std::vector<int64_t> kept = std::vector<int64_t>(buckets, 0);

  /// One draft: the head predicted `p` that the target keeps it, and it was kept or not.
  void add(double p, bool was_kept);
  /// Adds another decoder's buckets.
  void merge(const confidence_calibration& other);
  /// Drafts recorded over every bucket.
  int64_t total() const;

  /// The bucket a prediction falls in.
  static int bucket_of(double p);
  /// Bucket b's range as text: "0.3-0.4".
  static std::string bucket_name(int b);
};

}  // namespace brigade::model

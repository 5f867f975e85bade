// A confidence head: a small logistic model of how far a draft model's drafts will hold. For draft
// i of a step it predicts P(the target keeps draft i | it kept every draft before), from what the
// draft knew when it chose the token (draft_feature):
//
//   p_i = sigmoid(bias + w_log_probability * log(probability) + w_probability * probability
//                 + w_entropy * entropy + w_index * index)
//
// Both the probability and its log: a small draft's distribution over a large vocabulary is flat,
// and its drafts hold almost always from a probability of about 0.3 up, which a logistic in the
// log alone cannot follow.
//
// The product p_0 * ... * p_i is the chance that draft i is kept. A step feeds only the leading
// drafts whose product clears `threshold`: the rest would mostly be verified for nothing. And the
// draft computes its next token only while the product so far clears `continue_threshold`: below
// it the next draft would mostly be cut by `threshold` anyway, and its forward wasted. The head
// only chooses how many drafts the target verifies, never a token (model/speculation.hpp).
//
// It is fitted offline (scripts/fit_confidence_head.py, from `brigade bench speculation
// --record-events`) and kept beside its draft as confidence_head.json:
//
//   {"weights": {"bias": -8.3, "log_probability": -0.6, "probability": 19.1, "entropy": 0.7,
//                "index": 0.03},
//    "threshold": 0.5, "continue_threshold": 0.8}
//
// continue_threshold is optional (0: the draft goes on while the head verifies).
//
// What a verified draft costs against what it brings depends on the batch: on a CPU at batch 1
// a further verify row costs a fifth of a plain step and nearly every draft pays; in a large
// batch a row costs nearly a sequence's plain step and only likely drafts do. So the thresholds
// may differ by batch, `by_batch` (optional) giving them from a batch up, measured in the decode
// loop itself (`brigade bench speculation --tune-head`):
//
//   "by_batch": [{"batch_from": 1, "threshold": 0.1, "continue_threshold": 0.3},
//                {"batch_from": 4, "threshold": 0.5, "continue_threshold": 0.8}]
//
// A batch below the first entry's batch_from takes the top-level thresholds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "model/confidence_calibration.hpp"
#include "model/draft_source.hpp"

namespace brigade::model {

/// The file a draft directory's confidence head is kept in.
constexpr const char* confidence_head_file = "confidence_head.json";

struct confidence_head {
  /// The thresholds for batches from `batch_from` up (to the next rule's).
  struct batch_rule {
    int batch_from = 1;
    double threshold = 0.4;
    double continue_threshold = 0.0;
  };

  double bias = 0.0;
  double log_probability = 0.0;  ///< Weight of log(draft probability of its token).
  double probability = 0.0;      ///< Weight of the draft probability itself.
  double entropy = 0.0;          ///< Weight of the draft distribution's entropy (nats).
  double index = 0.0;            ///< Weight of the draft's index in its step.
  /// Drafts are verified while the predicted chance of keeping them is at least this.
  double threshold = 0.4;
  /// The draft computes its next token while the predicted chance of keeping every draft so far
  /// is at least this (0: while the drafts so far are verified).
  double continue_threshold = 0.0;
  /// Thresholds by batch, batch_from strictly ascending; empty: threshold and
  /// continue_threshold at every batch.
  std::vector<batch_rule> by_batch;

  /// The thresholds for a step in which `batch` sequences draft: the last rule of by_batch
  /// whose batch_from is at most `batch`, else the top-level ones.
  batch_rule rule(int batch) const;

  /// Whether a sequence whose drafts so far have cumulative prediction `cumulative` (all
  /// verified) should compute its next draft, in a step of `batch` drafting sequences.
  bool drafts_on(double cumulative, int batch = 1) const {
    return cumulative >= rule(batch).continue_threshold;
  }

  /// P(draft `f` is kept | every draft before it was).
  double predict(const draft_feature& f) const;
  /// How many leading drafts of `features` to verify in a step of `batch` drafting sequences:
  /// those whose cumulative prediction (the product of predict() up to and including them) is
  /// at least the batch's threshold.
  int keep(const std::vector<draft_feature>& features, int batch = 1) const;
  /// Records in `into` this head's prediction beside the outcome for each draft of one verify
  /// step that verification observed. `fed` holds the features of the drafts the target verified,
  /// in order, and it kept the first `kept`. Drafts 0 .. kept - 1 count as kept, and draft
  /// `kept`, when fed, as rejected. Drafts after a rejected one are not counted: verification
  /// stops at the first rejection and never compares them with a sample, and the prediction is
  /// conditional on every earlier draft being kept, which did not happen. Drafts the head cut
  /// before they were fed are not in `fed`: they were never verified, so they have no outcome.
  void calibrate(const std::vector<draft_feature>& fed, int kept,
                 confidence_calibration& into) const;

  /// The head as its JSON file holds it (parse() reads it back to the same head).
  std::string to_json() const;
  /// Parses the JSON text of a head; errors name `origin` and the field at fault.
  static result<confidence_head> parse(const std::string& text, const std::string& origin);
  /// Reads and parses the file at `path`.
  static result<confidence_head> load(const std::string& path);
  /// The head a draft in `draft_dir` runs with: `choice` "none" none; empty, the draft
  /// directory's confidence_head.json when there is one (none otherwise); else the file at
  /// `choice`.
  static result<std::shared_ptr<const confidence_head>> for_draft(const std::string& draft_dir,
                                                                  const std::string& choice);
};

}  // namespace brigade::model

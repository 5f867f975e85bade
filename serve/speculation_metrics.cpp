#include "serve/speculation_metrics.hpp"

#include <algorithm>
#include <string>

namespace brigade::serve {
namespace {

// Raises `c` to `total`; a total that went down leaves it where it was.
void raise_to(metrics::counter& c, double total) {
  c.inc(std::max(0.0, total - c.value()));
}

// The confidence head's calibration, per bucket of its prediction; nothing until a head judged a
// draft, so that a decoder without a head adds no series.
void collect_calibration(const model::confidence_calibration& c, metrics::registry& into) {
  if (c.total() == 0) return;
  auto& drafts = into.add_counter("brigade_speculative_calibration_drafts_total",
                                  "Verified drafts whose outcome was observed, by bucket of the "
                                  "confidence head's predicted acceptance.",
                                  {"bucket"});
  auto& predicted = into.add_counter("brigade_speculative_calibration_predicted_total",
                                     "Sum of the confidence head's predicted acceptance over "
                                     "those drafts; over the drafts, the mean prediction.",
                                     {"bucket"});
  auto& kept = into.add_counter("brigade_speculative_calibration_kept_total",
                                "Those drafts that verification kept; over the drafts, the "
                                "observed acceptance.",
                                {"bucket"});
  for (int b = 0; b < model::confidence_calibration::buckets; ++b) {
    const auto i = static_cast<size_t>(b);
    if (i >= c.drafts.size() || i >= c.predicted.size() || i >= c.kept.size()) break;
    const std::string bucket = model::confidence_calibration::bucket_name(b);
    raise_to(drafts.with({bucket}), static_cast<double>(c.drafts[i]));
    raise_to(predicted.with({bucket}), c.predicted[i]);
    raise_to(kept.with({bucket}), static_cast<double>(c.kept[i]));
  }
}

}  // namespace

void collect_speculation_metrics(const model::speculation_stats& totals, metrics::registry& into) {
  auto& drafted = into.add_counter("brigade_speculative_draft_tokens_total",
                                   "Draft tokens fed to verify steps.")
                      .get();
  auto& accepted = into.add_counter("brigade_speculative_accepted_tokens_total",
                                    "Draft tokens that verification kept.")
                       .get();
  auto& proposed = into.add_counter("brigade_speculative_proposed_tokens_total",
                                    "Draft tokens the draft source computed: those fed, and "
                                    "those a confidence head cut before they were fed.")
                       .get();
  raise_to(proposed, static_cast<double>(totals.proposed_tokens));
  auto& limited = into.add_counter("brigade_speculative_batch_limited_steps_total",
                                   "Decode steps that drafted nothing because more sequences "
                                   "decoded than speculation's disable_above_batch.")
                      .get();
  raise_to(drafted, static_cast<double>(totals.drafted_tokens));
  raise_to(accepted, static_cast<double>(totals.accepted_tokens));
  raise_to(limited, static_cast<double>(totals.batch_limited_steps));
  auto& gated = into.add_counter("brigade_speculative_gated_steps_total",
                                 "Decode steps that drafted nothing because the measured gate "
                                 "found drafting slower per token, or measured plain steps.")
                    .get();
  raise_to(gated, static_cast<double>(totals.gated_steps));
  auto& drafted_at = into.add_counter("brigade_speculative_draft_tokens_by_position_total",
                                      "Draft tokens fed at each draft index (0 is the first "
                                      "after the last token).",
                                      {"position"});
  auto& accepted_at = into.add_counter("brigade_speculative_accepted_tokens_by_position_total",
                                       "Draft tokens kept at each draft index; over the drafts "
                                       "fed there, the acceptance at that index.",
                                       {"position"});
  for (size_t i = 0; i < totals.drafted_at.size() && i < totals.accepted_at.size(); ++i) {
    const std::string position = std::to_string(i);
    auto& d = drafted_at.with({position});
    auto& a = accepted_at.with({position});
    raise_to(d, static_cast<double>(totals.drafted_at[i]));
    raise_to(a, static_cast<double>(totals.accepted_at[i]));
  }
  collect_calibration(totals.calibration, into);
}

}  // namespace brigade::serve

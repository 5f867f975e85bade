#include "serve/speculation_metrics.hpp"

#include <algorithm>
#include <string>

namespace brigade::serve {

void collect_speculation_metrics(const model::speculation_stats& totals, metrics::registry& into) {
  auto& drafted = into.add_counter("brigade_speculative_draft_tokens_total",
                                   "Draft tokens fed to verify steps.")
                      .get();
  auto& accepted = into.add_counter("brigade_speculative_accepted_tokens_total",
                                    "Draft tokens that verification kept.")
                       .get();
  auto& limited = into.add_counter("brigade_speculative_batch_limited_steps_total",
                                   "Decode steps that drafted nothing because more sequences "
                                   "decoded than speculation's disable_above_batch.")
                      .get();
  drafted.inc(std::max(0.0, static_cast<double>(totals.drafted_tokens) - drafted.value()));
  accepted.inc(std::max(0.0, static_cast<double>(totals.accepted_tokens) - accepted.value()));
  limited.inc(std::max(0.0, static_cast<double>(totals.batch_limited_steps) - limited.value()));
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
    d.inc(std::max(0.0, static_cast<double>(totals.drafted_at[i]) - d.value()));
    a.inc(std::max(0.0, static_cast<double>(totals.accepted_at[i]) - a.value()));
  }
}

}  // namespace brigade::serve

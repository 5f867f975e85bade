#include "serve/speculation_metrics.hpp"

#include <algorithm>

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
}

}  // namespace brigade::serve

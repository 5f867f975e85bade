// Expert loads as the planner sees them: tokens routed to each logical expert, per MoE layer.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::eplb {

/// Tokens per logical expert per layer, [layers][experts]. Counts are doubles because the
/// supervisor may feed averages or decayed sums rather than raw integers.
using load_matrix = std::vector<std::vector<double>>;

/// Checks that a load matrix has at least one layer, the same positive number of experts in every
/// layer, and only finite, non-negative entries. The message names the first offending cell.
status validate_load_matrix(const load_matrix& load);

/// Parses {"load": [[tokens per expert] per layer]} and validates the matrix.
result<load_matrix> load_matrix_from_json(const std::string& text);

}  // namespace brigade::eplb

// Speculation's counts as JSON, built once for every place that reports them: GET /v1/status
// (a decode worker's detail, the single-process engine's), and `generate --json`.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/confidence_calibration.hpp"
#include "model/speculation.hpp"

namespace brigade::model {

/// Per bucket of the prediction: {bucket, drafts, kept, mean_predicted, observed}, the drafts
/// verification judged, those kept, their mean prediction and the share kept (0 when empty).
nlohmann::json calibration_json(const confidence_calibration& c);

/// {max_draft, draft, verify_steps, drafted_tokens, proposed_tokens, accepted_tokens,
/// emitted_tokens, batch_limited_steps, gated_steps, drafted_by_position, accepted_by_position,
/// calibration}, and for a draft model draft_weights ("int8" or "as_stored") and
/// draft_attention_window (docs/speculation.md).
nlohmann::json speculation_json(const speculation_stats& s, int max_draft, draft_kind draft,
                                const std::string& draft_weights = "",
                                int draft_attention_window = 0);

}  // namespace brigade::model

// A confidence head's calibration as JSON, the same in GET /v1/status and `generate --json`.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "model/confidence_calibration.hpp"

namespace brigade::model {

/// Per bucket of the prediction: {bucket, drafts, kept, mean_predicted, observed}, the drafts
/// verification judged, those kept, their mean prediction and the share kept (0 when empty).
nlohmann::json calibration_json(const confidence_calibration& c);

}  // namespace brigade::model

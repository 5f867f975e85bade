#include "model/speculation_json.hpp"

#include <nlohmann/json.hpp>

namespace brigade::model {

nlohmann::json calibration_json(const confidence_calibration& c) {
  nlohmann::json out = nlohmann::json::array();
  for (int b = 0; b < confidence_calibration::buckets; ++b) {
    const auto i = static_cast<size_t>(b);
    const int64_t n = i < c.drafts.size() ? c.drafts[i] : 0;
    const double predicted = i < c.predicted.size() ? c.predicted[i] : 0.0;
    const int64_t kept = i < c.kept.size() ? c.kept[i] : 0;
    const double count = static_cast<double>(n);
    out.push_back({{"bucket", confidence_calibration::bucket_name(b)},
                   {"drafts", n},
                   {"kept", kept},
                   {"mean_predicted", n > 0 ? predicted / count : 0.0},
                   {"observed", n > 0 ? static_cast<double>(kept) / count : 0.0}});
  }
  return out;
}

nlohmann::json speculation_json(const speculation_stats& s, int max_draft, draft_kind draft,
                                const std::string& draft_weights, int draft_attention_window) {
  nlohmann::json out = {{"max_draft", max_draft},
                        {"draft", to_string(draft)},
                        {"verify_steps", s.verify_steps},
                        {"drafted_tokens", s.drafted_tokens},
                        {"proposed_tokens", s.proposed_tokens},
                        {"accepted_tokens", s.accepted_tokens},
                        {"emitted_tokens", s.emitted_tokens},
                        {"batch_limited_steps", s.batch_limited_steps},
                        {"gated_steps", s.gated_steps},
                        {"drafted_by_position", s.drafted_at},
                        {"accepted_by_position", s.accepted_at},
                        {"calibration", calibration_json(s.calibration)}};
  if (!draft_weights.empty()) {
    out["draft_weights"] = draft_weights;
    out["draft_attention_window"] = draft_attention_window;
  }
  return out;
}

}  // namespace brigade::model

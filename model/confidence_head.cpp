#include "model/confidence_head.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace brigade::model {
namespace {

using json = nlohmann::json;

// A draft probability of 0 would make the log infinite; a softmax never gives less than this
// anyway with a vocabulary of any sensible size and float logits.
constexpr double min_probability = 1e-30;

result<double> number_at(const json& object, const char* field, const std::string& where) {
  auto it = object.find(field);
  if (it == object.end()) return error(errc::bad_format, where + ": missing field '" + field + "'");
  if (!it->is_number() || !std::isfinite(it->get<double>()))
    return error(errc::bad_format, where + ": field '" + field + "' is not a finite number");
  return it->get<double>();
}

}  // namespace

double confidence_head::predict(const draft_feature& f) const {
  const double p = std::max(static_cast<double>(f.probability), min_probability);
  const double z = bias + log_probability * std::log(p) + probability * p +
                   entropy * static_cast<double>(f.entropy) + index * static_cast<double>(f.index);
  return 1.0 / (1.0 + std::exp(-z));
}

int confidence_head::keep(const std::vector<draft_feature>& features) const {
  double cumulative = 1.0;
  int kept = 0;
  for (const draft_feature& f : features) {
    cumulative *= predict(f);
    if (cumulative < threshold) break;
    ++kept;
  }
  return kept;
}

void confidence_head::calibrate(const std::vector<draft_feature>& fed, int kept,
                                confidence_calibration& into) const {
  const int observed = std::min(kept + 1, static_cast<int>(fed.size()));
  for (int i = 0; i < observed; ++i)
    into.add(predict(fed[static_cast<size_t>(i)]), i < kept);
}

result<confidence_head> confidence_head::parse(const std::string& text, const std::string& origin) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return error(errc::bad_format, origin + ": not a JSON object");
  auto weights = doc.find("weights");
  if (weights == doc.end() || !weights->is_object())
    return error(errc::bad_format, origin + ": missing object 'weights'");
  confidence_head h;
  const std::string in_weights = origin + ": weights";
  const std::pair<const char*, double*> fields[] = {{"bias", &h.bias},
                                                    {"log_probability", &h.log_probability},
                                                    {"probability", &h.probability},
                                                    {"entropy", &h.entropy},
                                                    {"index", &h.index}};
  for (const auto& [name, target] : fields) {
    auto v = number_at(*weights, name, in_weights);
    if (!v) return v.err();
    *target = v.value();
  }
  auto t = number_at(doc, "threshold", origin);
  if (!t) return t.err();
  if (t.value() < 0.0 || t.value() > 1.0)
    return error(errc::bad_format, origin + ": field 'threshold' must lie in [0, 1]");
  h.threshold = t.value();
  if (doc.contains("continue_threshold")) {
    auto c = number_at(doc, "continue_threshold", origin);
    if (!c) return c.err();
    if (c.value() < 0.0 || c.value() > 1.0)
      return error(errc::bad_format, origin + ": field 'continue_threshold' must lie in [0, 1]");
    h.continue_threshold = c.value();
  }
  return h;
}

result<confidence_head> confidence_head::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(errc::not_found, "cannot read confidence head " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

result<std::shared_ptr<const confidence_head>> confidence_head::for_draft(
    const std::string& draft_dir, const std::string& choice) {
  if (choice == "none") return std::shared_ptr<const confidence_head>();
  std::string path = choice;
  if (path.empty()) {
    const std::filesystem::path beside = std::filesystem::path(draft_dir) / confidence_head_file;
    if (!std::filesystem::exists(beside)) return std::shared_ptr<const confidence_head>();
    path = beside.string();
  }
  auto head = load(path);
  if (!head) return head.err();
  return std::shared_ptr<const confidence_head>(
      std::make_shared<const confidence_head>(head.value()));
}

}  // namespace brigade::model

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

// A threshold field of `object` in [0, 1]; `optional` ones default to 0.
result<double> threshold_at(const json& object, const char* field, const std::string& where,
                            bool optional = false) {
  if (optional && !object.contains(field)) return 0.0;
  auto v = number_at(object, field, where);
  if (!v) return v.err();
  if (v.value() < 0.0 || v.value() > 1.0)
    return error(errc::bad_format, where + ": field '" + field + "' must lie in [0, 1]");
  return v.value();
}

result<std::vector<confidence_head::batch_rule>> rules_at(const json& doc,
                                                          const std::string& origin) {
  std::vector<confidence_head::batch_rule> rules;
  auto it = doc.find("by_batch");
  if (it == doc.end()) return rules;
  if (!it->is_array())
    return error(errc::bad_format, origin + ": field 'by_batch' is not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& entry = (*it)[i];
    const std::string where = origin + ": by_batch[" + std::to_string(i) + "]";
    if (!entry.is_object()) return error(errc::bad_format, where + ": not an object");
    auto from = entry.find("batch_from");
    if (from == entry.end() || !from->is_number_integer() || from->get<int64_t>() < 1 ||
        from->get<int64_t>() > (int64_t{1} << 30))
      return error(errc::bad_format,
                   where + ": field 'batch_from' must be a whole number from 1 to 1073741824");
    confidence_head::batch_rule r;
    r.batch_from = static_cast<int>(from->get<int64_t>());
    if (!rules.empty() && r.batch_from <= rules.back().batch_from) {
      return error(errc::bad_format, where + ": batch_from " + std::to_string(r.batch_from) +
                                         " must be above the previous entry's " +
                                         std::to_string(rules.back().batch_from));
    }
    auto t = threshold_at(entry, "threshold", where);
    if (!t) return t.err();
    auto c = threshold_at(entry, "continue_threshold", where, true);
    if (!c) return c.err();
    r.threshold = t.value();
    r.continue_threshold = c.value();
    rules.push_back(r);
  }
  return rules;
}

}  // namespace

double confidence_head::predict(const draft_feature& f) const {
  const double p = std::max(static_cast<double>(f.probability), min_probability);
  const double z = bias + log_probability * std::log(p) + probability * p +
                   entropy * static_cast<double>(f.entropy) + index * static_cast<double>(f.index);
  return 1.0 / (1.0 + std::exp(-z));
}

confidence_head::batch_rule confidence_head::rule(int batch) const {
  batch_rule r{1, threshold, continue_threshold};
  for (const batch_rule& b : by_batch) {
    if (b.batch_from > batch) break;
    r = b;
  }
  return r;
}

int confidence_head::keep(const std::vector<draft_feature>& features, int batch) const {
  const double cut = rule(batch).threshold;
  double cumulative = 1.0;
  int kept = 0;
  for (const draft_feature& f : features) {
    cumulative *= predict(f);
    if (cumulative < cut) break;
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
  auto t = threshold_at(doc, "threshold", origin);
  if (!t) return t.err();
  h.threshold = t.value();
  auto c = threshold_at(doc, "continue_threshold", origin, true);
  if (!c) return c.err();
  h.continue_threshold = c.value();
  auto rules = rules_at(doc, origin);
  if (!rules) return rules.err();
  h.by_batch = std::move(rules.value());
  return h;
}

std::string confidence_head::to_json() const {
  // Ordered: the weights first, as a person reads the file.
  using ordered = nlohmann::ordered_json;
  ordered doc = {{"weights",
                  {{"bias", bias},
                   {"log_probability", log_probability},
                   {"probability", probability},
                   {"entropy", entropy},
                   {"index", index}}},
                 {"threshold", threshold}};
  if (continue_threshold > 0) doc["continue_threshold"] = continue_threshold;
  if (!by_batch.empty()) {
    ordered rules = ordered::array();
    for (const batch_rule& r : by_batch) {
      ordered entry = {{"batch_from", r.batch_from}, {"threshold", r.threshold}};
      if (r.continue_threshold > 0) entry["continue_threshold"] = r.continue_threshold;
      rules.push_back(std::move(entry));
    }
    doc["by_batch"] = std::move(rules);
  }
  return doc.dump(2) + "\n";
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

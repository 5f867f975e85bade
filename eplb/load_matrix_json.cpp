// JSON form of a load matrix: {"load": [[tokens per expert] per layer]}.
#include <nlohmann/json.hpp>
#include <string>

#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

result<load_matrix> load_matrix_from_json(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return error(errc::bad_format, "load file is not valid JSON");
  if (!doc.is_object() || !doc.contains("load") || !doc["load"].is_array()) {
    return error(errc::bad_format,
                 "load file needs {\"load\": [[tokens per expert] per layer]}: no \"load\" array");
  }
  load_matrix load;
  for (const auto& row : doc["load"]) {
    const std::string layer = std::to_string(load.size());
    if (!row.is_array()) {
      return error(errc::bad_format, "\"load\" layer " + layer + " is not an array of numbers");
    }
    std::vector<double> tokens;
    tokens.reserve(row.size());
    for (const auto& v : row) {
      if (!v.is_number()) {
        return error(errc::bad_format, "\"load\" layer " + layer + " expert " +
                                           std::to_string(tokens.size()) + " is " + v.dump() +
                                           ", not a number");
      }
      tokens.push_back(v.get<double>());
    }
    load.push_back(std::move(tokens));
  }
  if (status s = validate_load_matrix(load); !s) return s.err();
  return load;
}

}  // namespace brigade::eplb

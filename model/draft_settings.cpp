#include "model/draft_settings.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace brigade::model {

result<draft_settings> draft_settings::parse(const std::string& text, const std::string& origin) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return error(errc::bad_format, origin + ": not a JSON object");
  }
  draft_settings s;
  for (const auto& [key, value] : doc.items()) {
    if (key != "attention_window") {
      return error(errc::bad_format,
                   origin + ": field '" + key + "' is not a known field (attention_window)");
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > (int64_t{1} << 24)) {
      return error(errc::bad_format, origin + ": field 'attention_window' is " + value.dump() +
                                         "; it must be a whole number of positions from 0 "
                                         "(all) to 16777216");
    }
    s.attention_window = value.get<int>();
  }
  return s;
}

result<draft_settings> draft_settings::for_draft(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / file_name;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return draft_settings{};
  std::ifstream in(path);
  if (!in) return error(errc::io_error, "cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string());
}

}  // namespace brigade::model

#include "kvcache/retention.hpp"

namespace brigade::kvcache {

namespace {

using days = std::chrono::duration<std::int64_t, std::ratio<86400>>;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

retention::retention() {
  scenarios_.push_back({"chat", to_ns(days(7))});
  scenarios_.push_back({"agent", to_ns(days(3))});
}

status retention::set(std::string_view name, std::chrono::seconds period) {
  if (!valid_name(name)) {
    return error(errc::invalid_argument,
                 "scenario name '" + std::string(name) +
                     "' is invalid: use 1 to 64 characters of lower-case letters, digits, _ or -");
  }
  if (period.count() <= 0) {
    return error(errc::invalid_argument, "scenario '" + std::string(name) +
                                             "': retention period must be positive, got " +
                                             std::to_string(period.count()) + " s");
  }
  for (auto& s : scenarios_) {
    if (s.name == name) {
      s.period_ns = to_ns(period);
      return ok_status();
    }
  }
  if (scenarios_.size() >= max_scenarios) {
    return error(errc::resource_exhausted, "cannot add scenario '" + std::string(name) +
                                               "': a retention table holds at most " +
                                               std::to_string(max_scenarios) + " scenarios");
  }
  scenarios_.push_back({std::string(name), to_ns(period)});
  return ok_status();
}

result<scenario_id> retention::find(std::string_view name) const {
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    if (scenarios_[i].name == name) return static_cast<scenario_id>(i);
  }
  std::string known;
  for (const auto& s : scenarios_)
    known += (known.empty() ? "" : ", ") + s.name;
  return error(errc::invalid_argument, "unknown scenario '" + std::string(name) +
                                           "': known scenarios are " + known +
                                           " (add others to the manifest's retention table)");
}

}  // namespace brigade::kvcache

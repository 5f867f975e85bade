#include "config/yaml_section.hpp"

#include <cmath>
#include <map>

namespace brigade::config {
namespace {

// A node's `device`: one device for all its roles, or a mapping of role kinds to devices.
void node_device(yaml_section& node, node_spec& spec) {
  node.raw("device", [&](const YAML::Node& n) {
    if (!n.IsMap()) {
      gpu::device_choice d;
      node.device("device", d);
      spec.device = d;
      return;
    }
    yaml_section kinds(n, node.path() + "device.", node.source(), node.err());
    kinds.begin();
    auto one = [&](const char* kind, std::optional<gpu::device_choice>& out) {
      kinds.raw(kind, [&](const YAML::Node&) {
        gpu::device_choice d;
        kinds.device(kind, d);
        out = d;
      });
    };
    one("prefill", spec.prefill_device);
    one("decode", spec.decode_device);
    one("expert_shard", spec.expert_shard_device);
    kinds.finish();
  });
}

// A mapping key as text; empty for a key that is not a plain scalar (YAML allows lists and
// mappings as keys: "? [a, b]"), which no manifest field has.
std::string key_text(const YAML::Node& key) {
  return key.IsScalar() ? key.Scalar() : "";
}

// Splits "12.5GiB" into its number and unit; false when the number part is missing.
bool split_number(const std::string& text, double& number, std::string& unit) {
  size_t digits = 0;
  while (digits < text.size() &&
         ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return false;
  try {
    size_t used = 0;
    number = std::stod(text.substr(0, digits), &used);
    if (used != digits) return false;
  } catch (const std::exception&) {
    return false;
  }
  unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ')
    unit.erase(unit.begin());
  return true;
}

}  // namespace

bool parse_bytes(const std::string& text, uint64_t& out) {
  static const std::map<std::string, double> units = {{"", 1},
                                                      {"B", 1},
                                                      {"KiB", 1024.0},
                                                      {"MiB", 1048576.0},
                                                      {"GiB", 1073741824.0},
                                                      {"TiB", 1099511627776.0},
                                                      {"KB", 1e3},
                                                      {"MB", 1e6},
                                                      {"GB", 1e9},
                                                      {"TB", 1e12}};
  double number = 0;
  std::string unit;
  if (!split_number(text, number, unit)) return false;
  const auto it = units.find(unit);
  if (it == units.end()) return false;
  const double value = number * it->second;
  if (value < 0 || value > 1e18 || value != static_cast<double>(static_cast<uint64_t>(value))) {
    return false;
  }
  out = static_cast<uint64_t>(value);
  return true;
}

bool parse_duration_s(const std::string& text, int64_t& out) {
  static const std::map<std::string, double> units = {
      {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
  double number = 0;
  std::string unit;
  if (!split_number(text, number, unit)) return false;
  const auto it = units.find(unit);
  if (it == units.end()) return false;
  const double seconds = number * it->second;
  if (seconds < 1 || seconds > 3650.0 * 86400) return false;
  out = static_cast<int64_t>(seconds);
  return true;
}

bool parse_duration_ms(const std::string& text, int64_t& out) {
  static const std::map<std::string, double> units = {
      {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}};
  double number = 0;
  std::string unit;
  if (!split_number(text, number, unit)) return false;
  const auto it = units.find(unit);
  if (it == units.end()) return false;
  const double ms = number * it->second;
  if (!std::isfinite(ms) || ms < 0 || ms > 1e15) return false;
  out = static_cast<int64_t>(std::llround(ms));
  return true;
}

yaml_section::yaml_section(const YAML::Node& node, std::string path, std::string source, error* err)
    : node_(node), path_(std::move(path)), source_(std::move(source)), err_(err) {}

void yaml_section::integer(const char* key, int& out, int min, int max) {
  read(key, [&](const YAML::Node& n) {
    int v = 0;
    if (!YAML::convert<int>::decode(n, v)) return fail(key, "must be an integer");
    if (v < min || v > max) {
      return fail(key, "is " + std::to_string(v) + "; it must be between " + std::to_string(min) +
                           " and " + std::to_string(max));
    }
    out = v;
  });
}

void yaml_section::integer64(const char* key, int64_t& out, int64_t min, int64_t max) {
  read(key, [&](const YAML::Node& n) {
    long long v = 0;
    if (!YAML::convert<long long>::decode(n, v)) return fail(key, "must be an integer");
    if (v < min || v > max) {
      return fail(key, "is " + std::to_string(v) + "; it must be between " + std::to_string(min) +
                           " and " + std::to_string(max));
    }
    out = v;
  });
}

void yaml_section::flag(const char* key, bool& out) {
  read(key, [&](const YAML::Node& n) {
    if (!YAML::convert<bool>::decode(n, out)) return fail(key, "must be true or false");
  });
}

void yaml_section::number(const char* key, double& out, double min) {
  read(key, [&](const YAML::Node& n) {
    double v = 0;
    if (!YAML::convert<double>::decode(n, v)) return fail(key, "must be a number");
    if (!std::isfinite(v)) return fail(key, "must be a finite number (it is " + n.Scalar() + ")");
    if (v < min) return fail(key, "must be at least " + std::to_string(min));
    out = v;
  });
}

void yaml_section::text(const char* key, std::string& out) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsScalar() || n.Scalar().empty()) return fail(key, "must be a non-empty string");
    out = n.Scalar();
  });
}

void yaml_section::texts(const char* key, std::vector<std::string>& out) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsSequence()) return fail(key, "must be a list of strings");
    out.clear();
    for (const auto& e : n) {
      if (!e.IsScalar() || e.Scalar().empty()) return fail(key, "must be a list of strings");
      out.push_back(e.Scalar());
    }
  });
}

void yaml_section::device(const char* key, gpu::device_choice& out) {
  read(key, [&](const YAML::Node& n) {
    const std::string text =
        n.IsScalar() ? n.Scalar() : std::string("a ") + (n.IsMap() ? "mapping" : "list");
    auto parsed = gpu::parse_device(text, path_ + key);
    if (!parsed) return fail(key, "is '" + text + "'; it must be " + gpu::device_forms);
    out = parsed.value();
  });
}

void yaml_section::nodes(const char* key, std::vector<node_spec>& out) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsSequence()) return fail(key, "must be a list of nodes");
    for (size_t i = 0; i < n.size() && ok(); ++i) {
      const std::string path = path_ + key + "[" + std::to_string(i) + "].";
      yaml_section node(n[i], path, source_, err_);
      node.begin();
      node_spec spec;
      node.text("name", spec.name);
      node.text("address", spec.address);
      node.child("roles", [&](yaml_section& roles) {
        roles.integer("prefill", spec.prefill, 0, 1024);
        roles.integer("decode", spec.decode, 0, 1024);
        roles.integer("expert_shard", spec.expert_shards, 0, 4096);
      });
      node_device(node, spec);
      node.finish();
      if (ok() && (spec.name.empty() || spec.address.empty())) {
        return fail(key, "entry " + std::to_string(i) + " needs a name and an address");
      }
      out.push_back(spec);
    }
  });
}

void yaml_section::bytes(const char* key, uint64_t& out) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsScalar() || !parse_bytes(n.Scalar(), out)) {
      return fail(key,
                  "must be a size in bytes: an integer or a number with B, KiB, MiB, "
                  "GiB, TiB, KB, MB, GB or TB, e.g. 512MiB");
    }
  });
}

void yaml_section::durations(const char* key, std::vector<std::pair<std::string, int64_t>>& out) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsMap()) return fail(key, "must be a mapping of scenario names to durations");
    out.clear();
    for (const auto& kv : n) {
      const std::string name = key_text(kv.first);
      if (name.empty()) return fail(key, "has a key that is not a scenario name");
      int64_t seconds = 0;
      if (!kv.second.IsScalar() || !parse_duration_s(kv.second.Scalar(), seconds)) {
        return fail((std::string(key) + "." + name).c_str(),
                    "must be a positive duration: seconds, or a number with s, m, h or d "
                    "(e.g. 7d, 12h), at most 3650d");
      }
      out.emplace_back(name, seconds);
    }
  });
}

void yaml_section::duration_ms(const char* key, int64_t& out, int64_t min_ms, int64_t max_ms) {
  read(key, [&](const YAML::Node& n) {
    int64_t ms = 0;
    if (!n.IsScalar() || !parse_duration_ms(n.Scalar(), ms)) {
      return fail(key,
                  "must be a duration: milliseconds, or a number with ms, s or m "
                  "(e.g. 250ms, 1.5s)");
    }
    if (ms < min_ms || ms > max_ms) {
      return fail(key, "is " + std::to_string(ms) + " ms; it must be between " +
                           std::to_string(min_ms) + " and " + std::to_string(max_ms) + " ms");
    }
    out = ms;
  });
}

void yaml_section::child(const char* key, const std::function<void(yaml_section&)>& fn) {
  read(key, [&](const YAML::Node& n) {
    if (!n.IsMap()) return fail(key, "must be a mapping");
    yaml_section sub(n, path_ + key + ".", source_, err_);
    sub.begin();
    fn(sub);
    sub.finish();
  });
}

void yaml_section::raw(const char* key, const std::function<void(const YAML::Node&)>& fn) {
  read(key, fn);
}

void yaml_section::invalid(const char* key, const std::string& what) {
  fail(key, what);
}

void yaml_section::begin() {
  if (ok() && !node_.IsMap() && !node_.IsNull()) {
    *err_ =
        error(errc::bad_format, source_ + ": " + name() + " must be a mapping of keys to values");
  }
}

void yaml_section::finish() {
  if (!ok() || !node_.IsMap()) return;
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    const std::string key = key_text(kv.first);
    // YAML parsers keep both of a repeated key; one of them would win without a word.
    if (!key.empty() && !seen.insert(key).second) return fail(key.c_str(), "appears twice");
    if (key.empty()) {
      *err_ = error(errc::bad_format,
                    source_ + ": " + name() +
                        " has a key that is not a field name (a list, mapping or empty key)");
      return;
    }
    if (!known_.count(key)) return fail(key.c_str(), "is not a known field");
  }
}

// This section as errors name it: "the manifest" or its path ("roles.decode").
std::string yaml_section::name() const {
  return path_.empty() ? "the manifest" : path_.substr(0, path_.size() - 1);
}

void yaml_section::read(const char* key, const std::function<void(const YAML::Node&)>& fn) {
  known_.insert(key);
  if (!ok() || !node_.IsMap()) return;
  const YAML::Node n = node_[key];
  if (!n || n.IsNull()) return;
  fn(n);
}

void yaml_section::fail(const char* key, const std::string& what) {
  if (!ok()) return;
  *err_ = error(errc::bad_format, source_ + ": field '" + path_ + key + "' " + what);
}

}  // namespace brigade::config

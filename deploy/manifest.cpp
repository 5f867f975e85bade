#include "deploy/manifest.hpp"

#include <yaml-cpp/yaml.h>
#include <cmath>

#include <chrono>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "kvcache/retention.hpp"

namespace brigade::deploy {
namespace {

bool parse_bytes(const std::string& text, uint64_t& out);
bool parse_duration_s(const std::string& text, int64_t& out);

// A mapping key as text; empty for a key that is not a plain scalar (YAML allows lists and
// mappings as keys: "? [a, b]"), which no manifest field has.
std::string key_text(const YAML::Node& key) {
  return key.IsScalar() ? key.Scalar() : "";
}

// Reads one YAML mapping, naming fields by their path ("roles.decode.count") in errors, and
// rejecting keys it does not know so that a typo never silently falls back to a default.
class section {
 public:
  section(const YAML::Node& node, std::string path, std::string source, error* err)
      : node_(node), path_(std::move(path)), source_(std::move(source)), err_(err) {}

  bool ok() const { return err_->message.empty(); }

  void integer(const char* key, int& out, int min, int max) {
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
  void integer64(const char* key, int64_t& out, int64_t min, int64_t max) {
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
  void flag(const char* key, bool& out) {
    read(key, [&](const YAML::Node& n) {
      if (!YAML::convert<bool>::decode(n, out)) return fail(key, "must be true or false");
    });
  }
  void number(const char* key, double& out, double min) {
    read(key, [&](const YAML::Node& n) {
      double v = 0;
      if (!YAML::convert<double>::decode(n, v)) return fail(key, "must be a number");
      if (!std::isfinite(v)) return fail(key, "must be a finite number (it is " + n.Scalar() + ")");
      if (v < min) return fail(key, "must be at least " + std::to_string(min));
      out = v;
    });
  }
  void text(const char* key, std::string& out) {
    read(key, [&](const YAML::Node& n) {
      if (!n.IsScalar() || n.Scalar().empty()) return fail(key, "must be a non-empty string");
      out = n.Scalar();
    });
  }
  void texts(const char* key, std::vector<std::string>& out) {
    read(key, [&](const YAML::Node& n) {
      if (!n.IsSequence()) return fail(key, "must be a list of strings");
      out.clear();
      for (const auto& e : n) {
        if (!e.IsScalar() || e.Scalar().empty()) return fail(key, "must be a list of strings");
        out.push_back(e.Scalar());
      }
    });
  }
  /// A list of nodes: each a mapping with name, address and the roles it hosts.
  void nodes(const char* key, std::vector<node_spec>& out) {
    read(key, [&](const YAML::Node& n) {
      if (!n.IsSequence()) return fail(key, "must be a list of nodes");
      for (size_t i = 0; i < n.size() && ok(); ++i) {
        const std::string path = path_ + key + "[" + std::to_string(i) + "].";
        section node(n[i], path, source_, err_);
        node.begin();
        node_spec spec;
        node.text("name", spec.name);
        node.text("address", spec.address);
        node.child("roles", [&](section& roles) {
          roles.integer("prefill", spec.prefill, 0, 1024);
          roles.integer("decode", spec.decode, 0, 1024);
          roles.integer("expert_shard", spec.expert_shards, 0, 4096);
        });
        node.finish();
        if (ok() && (spec.name.empty() || spec.address.empty())) {
          return fail(key, "entry " + std::to_string(i) + " needs a name and an address");
        }
        out.push_back(spec);
      }
    });
  }
  /// A size in bytes: an integer, or a string with a unit ("512MiB", "2GiB", "64KiB", "1GB").
  void bytes(const char* key, uint64_t& out) {
    read(key, [&](const YAML::Node& n) {
      if (!n.IsScalar() || !parse_bytes(n.Scalar(), out)) {
        return fail(key,
                    "must be a size in bytes: an integer or a number with B, KiB, MiB, "
                    "GiB, TiB, KB, MB, GB or TB, e.g. 512MiB");
      }
    });
  }
  /// A mapping of names to durations (seconds, or a number with s, m, h or d: "7d", "12h").
  void durations(const char* key, std::vector<std::pair<std::string, int64_t>>& out) {
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
  /// Reports an error on `key` found by a check after reading.
  void invalid(const char* key, const std::string& what) { fail(key, what); }
  /// Calls `fn` with the sub-section `key` when present.
  void child(const char* key, const std::function<void(section&)>& fn) {
    read(key, [&](const YAML::Node& n) {
      if (!n.IsMap()) return fail(key, "must be a mapping");
      section sub(n, path_ + key + ".", source_, err_);
      sub.begin();
      fn(sub);
      sub.finish();
    });
  }
  /// Checks the node is a mapping; call before reading.
  void begin() {
    if (ok() && !node_.IsMap() && !node_.IsNull()) {
      *err_ =
          error(errc::bad_format, source_ + ": " + name() + " must be a mapping of keys to values");
    }
  }
  /// Rejects keys nobody read.
  void finish() {
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

 private:
  // This section as errors name it: "the manifest" or its path ("roles.decode").
  std::string name() const {
    return path_.empty() ? "the manifest" : path_.substr(0, path_.size() - 1);
  }
  void read(const char* key, const std::function<void(const YAML::Node&)>& fn) {
    known_.insert(key);
    if (!ok() || !node_.IsMap()) return;
    const YAML::Node n = node_[key];
    if (!n || n.IsNull()) return;
    fn(n);
  }
  void fail(const char* key, const std::string& what) {
    if (!ok()) return;
    *err_ = error(errc::bad_format, source_ + ": field '" + path_ + key + "' " + what);
  }

  YAML::Node node_;
  std::string path_;
  std::string source_;
  error* err_;
  std::set<std::string> known_;
};

// The least host tier an SSD tier works with (see read_kv_cache).
constexpr uint64_t min_host_bytes_with_ssd = uint64_t{1} << 20;

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

// kv_cache: the budgets of the three tiers, the SSD directory and the scenarios' retention.
void read_kv_cache(section& s, kv_cache_policy& kv) {
  s.flag("enabled", kv.enabled);
  s.bytes("pool_bytes", kv.pool_bytes);
  s.bytes("host_bytes", kv.host_bytes);
  s.bytes("ssd_bytes", kv.ssd_bytes);
  s.text("ssd_dir", kv.ssd_dir);
  std::vector<std::pair<std::string, int64_t>> scenarios;
  s.durations("scenarios", scenarios);
  if (!s.ok()) return;
  if (kv.ssd_bytes > 0 && kv.ssd_dir.empty()) {
    return s.invalid("ssd_dir", "is missing: ssd_bytes needs a directory for the SSD tier");
  }
  if (kv.ssd_bytes > 0 && kv.host_bytes < min_host_bytes_with_ssd) {
    // A block read from SSD is handed to workers through the host tier: without room there it
    // is demoted again before anyone fetches it, and no SSD hit is ever served.
    return s.invalid("host_bytes",
                     "is " + std::to_string(kv.host_bytes) +
                         " bytes; with an SSD tier it must be at least 1MiB, as blocks read "
                         "from SSD are served through host memory");
  }
  if (!kv.ssd_dir.empty() && kv.ssd_bytes == 0) {
    return s.invalid("ssd_bytes", "is missing or 0: ssd_dir needs a byte budget, e.g. 64GiB");
  }
  // The same rules the cache applies: chat and agent are always there, others are added.
  kvcache::retention table;
  for (const auto& [name, seconds] : scenarios) {
    status set = table.set(name, std::chrono::seconds(seconds));
    if (!set) return s.invalid(("scenarios." + name).c_str(), set.err().message);
  }
  for (const auto& [name, seconds] : scenarios) {
    bool found = false;
    for (auto& known : kv.scenarios) {
      if (known.name == name) {
        known.retention_s = seconds;
        found = true;
      }
    }
    if (!found) kv.scenarios.push_back({name, seconds});
  }
}

status check_listen(const std::string& listen, const std::string& source) {
  const auto colon = listen.rfind(':');
  const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5;
  for (char ch : port)
    digits = digits && ch >= '0' && ch <= '9';
  if (colon == 0 || !digits || std::stoi(port) > 65535) {
    return error(errc::bad_format, source + ": field 'serve.listen' is '" + listen +
                                       "'; it must be HOST:PORT, e.g. 127.0.0.1:8000");
  }
  return ok_status();
}

// With nodes, the role counts are the sums of what the nodes host.
status check_nodes(manifest& m, const std::string& source) {
  if (m.nodes.empty()) return ok_status();
  auto bad = [&](const std::string& what) { return error(errc::bad_format, source + ": " + what); };
  if (m.join_secret_file.empty()) {
    return bad(
        "field 'join_secret_file' is required when 'nodes' are listed: nodes refuse a "
        "coordinator that cannot prove the shared secret");
  }
  std::set<std::string> names, addresses;
  int prefill = 0, decode = 0, shards = 0;
  for (const auto& n : m.nodes) {
    if (!names.insert(n.name).second) return bad("node name '" + n.name + "' appears twice");
    if (n.name == "local") {
      return bad(
          "node name 'local' is reserved for roles in the coordinator's own process: "
          "name the node otherwise");
    }
    if (!addresses.insert(n.address).second) {
      return bad("node address '" + n.address + "' appears twice");
    }
    status addr = check_listen(n.address, source);
    if (!addr) return bad("node '" + n.name + "': address '" + n.address + "' must be HOST:PORT");
    if (std::stoi(n.address.substr(n.address.rfind(':') + 1)) == 0) {
      return bad("node '" + n.name + "': address '" + n.address +
                 "' has port 0; give the port its agent listens on");
    }
    prefill += n.prefill;
    decode += n.decode;
    shards += n.expert_shards;
  }
  if (prefill < 1 || decode < 1 || shards < 1) {
    return bad(
        "the nodes must host at least one prefill worker, one decode worker and one "
        "expert shard (they host " +
        std::to_string(prefill) + ", " + std::to_string(decode) + " and " + std::to_string(shards) +
        ")");
  }
  m.prefill.count = prefill;
  m.decode.count = decode;
  m.experts.count = shards;
  return ok_status();
}

void read_speculation(section& s, model::speculation_options& out) {
  s.integer("max_draft", out.max_draft, 0, 64);
  s.integer("max_ngram", out.max_ngram, 1, 64);
  s.integer("min_ngram", out.min_ngram, 1, 64);
  s.number("min_trust", out.min_trust, 0.0);
  s.integer("lookback_tokens", out.lookback_tokens, 1, 1 << 24);
  s.flag("adaptive", out.adaptive);
  s.integer("disable_above_batch", out.disable_above_batch, 0, 1 << 20);
  if (out.min_trust > 1.0 || out.min_trust == 0.0) s.invalid("min_trust", "must be in (0, 1]");
  if (out.max_ngram < out.min_ngram) s.invalid("max_ngram", "must be at least min_ngram");
}

}  // namespace

result<manifest> parse_manifest(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return error(errc::bad_format, source + ": not valid YAML: " + e.what());
  }
  manifest m;
  m.source = source;
  error err;
  section top(root, "", source, &err);
  top.begin();
  top.text("model", m.model);
  top.integer("block_tokens", m.block_tokens, 1, 4096);
  top.child("serve", [&](section& s) {
    s.text("listen", m.listen);
    s.texts("api_keys", m.api_keys);
    s.text("model_name", m.served_model_name);
    s.integer("admission_queue", m.admission_queue, 1, 1 << 20);
  });
  top.child("roles", [&](section& roles) {
    roles.child("prefill", [&](section& s) {
      s.integer("count", m.prefill.count, 1, 1024);
      s.integer("max_step_tokens", m.prefill.max_step_tokens, 1, 1 << 20);
      s.integer("kv_tokens", m.prefill.kv_tokens, 1, 1 << 28);
    });
    roles.child("decode", [&](section& s) {
      s.integer("count", m.decode.count, 1, 1024);
      s.integer("max_running", m.decode.max_running, 1, 4096);
      s.integer("kv_tokens", m.decode.kv_tokens, 1, 1 << 28);
      s.child("speculation", [&](section& spec) { read_speculation(spec, m.decode.speculation); });
    });
    roles.child("expert_shard", [&](section& s) {
      s.integer("count", m.experts.count, 1, 4096);
      s.integer("slots_per_shard", m.experts.slots_per_shard, 0, 1 << 16);
    });
  });
  top.child("restart", [&](section& s) {
    s.integer("max_restarts", m.restart.max_restarts, 0, 1 << 20);
    s.number("window_s", m.restart.window_s, 0.001);
    s.integer("backoff_ms", m.restart.backoff_ms, 0, 3600 * 1000);
    s.integer("max_backoff_ms", m.restart.max_backoff_ms, 0, 3600 * 1000);
  });
  top.child("eplb", [&](section& s) {
    s.flag("enabled", m.eplb.enabled);
    s.integer64("sample_interval_steps", m.eplb.sample_interval_steps, 1, int64_t{1} << 40);
    s.integer64("replan_interval_steps", m.eplb.replan_interval_steps, 1, int64_t{1} << 40);
    s.number("margin", m.eplb.margin, 0.0);
    s.integer("copy_interval_ms", m.eplb.copy_interval_ms, 0, 60 * 1000);
  });
  top.text("join_secret_file", m.join_secret_file);
  top.child("transport", [&](section& s) {
    s.text("tls", m.transport.tls);
    s.text("net_devices", m.transport.net_devices);
  });
  top.nodes("nodes", m.nodes);
  top.child("kv_cache", [&](section& s) { read_kv_cache(s, m.kv_cache); });
  top.finish();
  if (!err.message.empty()) return err;
  if (m.model.empty()) return error(errc::bad_format, source + ": field 'model' is missing");
  if (m.eplb.replan_interval_steps < m.eplb.sample_interval_steps) {
    return error(errc::bad_format, source + ": field 'eplb.replan_interval_steps' (" +
                                       std::to_string(m.eplb.replan_interval_steps) +
                                       ") is shorter than eplb.sample_interval_steps (" +
                                       std::to_string(m.eplb.sample_interval_steps) + ")");
  }
  status nodes = check_nodes(m, source);
  if (!nodes) return nodes.err();
  status listen = check_listen(m.listen, source);
  if (!listen) return listen.err();
  return m;
}

result<manifest> load_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(errc::not_found, path + ": cannot open the manifest");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_manifest(ss.str(), path);
}

manifest default_manifest(const std::string& model_dir) {
  manifest m;
  m.model = model_dir;
  return m;
}

}  // namespace brigade::deploy

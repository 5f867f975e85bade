#include "config/manifest.hpp"

#include <yaml-cpp/yaml.h>
#include <cmath>

#include <chrono>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "config/role_placement.hpp"
#include "config/yaml_section.hpp"
#include "kvcache/retention.hpp"
#include "model/kv_layout.hpp"

namespace brigade::config {
namespace {

// The least host tier an SSD tier works with (see read_kv_cache).
constexpr uint64_t min_host_bytes_with_ssd = uint64_t{1} << 20;

// kv_cache: the budgets of the three tiers, the SSD directory and the scenarios' retention.
void read_kv_cache(yaml_section& s, kv_cache_policy& kv) {
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

// serve.api_keys: each entry a key, or {key: K, cache_salt: S} binding K's requests to the
// prefix-cache namespace S.
void read_api_keys(yaml_section& s, std::vector<serve::api_key>& out) {
  s.raw("api_keys", [&](const YAML::Node& n) {
    if (!n.IsSequence()) {
      return s.invalid("api_keys",
                       "must be a list of keys: strings, or mappings {key: KEY, cache_salt: SALT}");
    }
    out.clear();
    for (size_t i = 0; i < n.size() && s.ok(); ++i) {
      const std::string at = "api_keys[" + std::to_string(i) + "]";
      serve::api_key k;
      if (n[i].IsScalar()) {
        k.key = n[i].Scalar();
      } else if (n[i].IsMap()) {
        yaml_section entry(n[i], s.path() + at + ".", s.source(), s.err());
        entry.begin();
        entry.text("key", k.key);
        entry.text("cache_salt", k.cache_salt);
        entry.finish();
        if (!s.ok()) return;
        if (k.key.empty()) return entry.invalid("key", "is missing");
        if (!k.cache_salt.empty() && !serve::valid_cache_salt(k.cache_salt)) {
          return entry.invalid(
              "cache_salt",
              "must have 1 to " + std::to_string(serve::max_cache_salt_chars) + " characters");
        }
      } else {
        return s.invalid(at.c_str(), "must be a key (a string) or a mapping {key, cache_salt}");
      }
      if (k.key.empty()) return s.invalid(at.c_str(), "is an empty key");
      out.push_back(std::move(k));
    }
  });
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

// speculation.draft: where drafts come from; without it, a draft model when draft_model is set
// and prompt lookup otherwise.
void read_draft_kind(yaml_section& s, model::speculation_options& out) {
  std::string name;
  s.text("draft", name);
  s.text("draft_model", out.draft_model);
  if (!s.ok()) return;
  if (name.empty()) name = out.draft_model.empty() ? "lookup" : "model";
  if (name == "lookup") {
    out.draft = model::draft_kind::lookup;
  } else if (name == "model") {
    out.draft = model::draft_kind::model;
  } else if (name == "none") {
    out.draft = model::draft_kind::none;
  } else {
    return s.invalid("draft", "is '" + name + "'; it must be lookup, model or none");
  }
  if (out.draft == model::draft_kind::model && out.draft_model.empty()) {
    return s.invalid("draft_model",
                     "is missing: draft: model needs the draft checkpoint's directory");
  }
  if (out.draft != model::draft_kind::model && !out.draft_model.empty()) {
    s.invalid("draft_model", "is set, but draft is " + name + ": set draft: model or drop it");
  }
}

// speculation: how many drafts, where from, and prompt lookup's settings. A draft model drafts
// model::default_model_drafts per step unless max_draft says otherwise.
void read_speculation(yaml_section& s, model::speculation_options& out) {
  int max_draft = -1;
  s.integer("max_draft", max_draft, 0, 64);
  read_draft_kind(s, out);
  if (max_draft >= 0) {
    out.max_draft = max_draft;
  } else if (out.draft == model::draft_kind::model) {
    out.max_draft = model::default_model_drafts;
  }
  s.integer("max_ngram", out.max_ngram, 1, 64);
  s.integer("min_ngram", out.min_ngram, 1, 64);
  s.number("min_trust", out.min_trust, 0.0);
  s.integer("lookback_tokens", out.lookback_tokens, 1, 1 << 24);
  s.integer("draft_attention_window", out.draft_attention_window, 0, 1 << 24);
  s.flag("adaptive", out.adaptive);
  s.integer("disable_above_batch", out.disable_above_batch, 0, 1 << 20);
  s.flag("measured_gate", out.measured_gate);
  if (out.min_trust > 1.0 || out.min_trust == 0.0) s.invalid("min_trust", "must be in (0, 1]");
  if (out.max_ngram < out.min_ngram) s.invalid("max_ngram", "must be at least min_ngram");
}

void read_liveness(yaml_section& s, liveness_policy& l) {
  int64_t ms = 0;
  auto duration = [&](const char* key, int& out, int64_t min_ms, int64_t max_ms) {
    ms = out;
    s.duration_ms(key, ms, min_ms, max_ms);
    out = static_cast<int>(ms);
  };
  duration("heartbeat", l.heartbeat_ms, 10, 60000);
  s.number("suspect_phi", l.suspect_phi, 0.5);
  duration("acceptable_pause", l.acceptable_pause_ms, 0, 600000);
  duration("dead_after", l.dead_after_ms, 100, 3600000);
  duration("rejoin_window", l.rejoin_window_ms, 0, 600000);
  duration("redial_max_backoff", l.redial_max_backoff_ms, 10, 600000);
  duration("grace", l.grace_ms, 0, 86400000);
  duration("no_worker_timeout", l.no_worker_timeout_ms, 0, 86400000);
  if (!s.ok()) return;
  if (l.dead_after_ms < 2 * l.heartbeat_ms) {
    s.invalid("dead_after", "(" + std::to_string(l.dead_after_ms) +
                                " ms) must be at least two heartbeats (" +
                                std::to_string(2 * l.heartbeat_ms) + " ms)");
  }
}

// eplb.group_placement: node or free.
void read_group_placement(yaml_section& s, group_placement& out) {
  std::string name;
  s.text("group_placement", name);
  if (name.empty()) return;
  if (name == "node" || name == "free") {
    out = name == "node" ? group_placement::node : group_placement::free;
    return;
  }
  s.invalid("group_placement", "is '" + name + "'; it must be node or free");
}

// eplb.group_placement: node gives every node hosting expert shards the same number of groups,
// and the planner's nodes are blocks of as many contiguous shards: it needs two such nodes or
// more, each hosting as many shards.
status check_group_placement(const manifest& m, const std::string& source) {
  if (m.eplb.placement != group_placement::node) return ok_status();
  const std::string field = source + ": field 'eplb.group_placement' is node, but ";
  std::vector<const node_spec*> hosts;
  for (const auto& n : m.nodes) {
    if (n.expert_shards > 0) hosts.push_back(&n);
  }
  if (hosts.size() < 2) {
    const std::string found = m.nodes.empty()
                                  ? "the manifest lists no nodes"
                                  : std::to_string(hosts.size()) + " node hosts expert shards";
    return error(errc::bad_format, field + found +
                                       ": a group is kept on one node only where two nodes or "
                                       "more host expert shards (use free)");
  }
  for (const node_spec* n : hosts) {
    if (n->expert_shards == hosts.front()->expert_shards) continue;
    return error(errc::bad_format,
                 field + "node '" + hosts.front()->name + "' hosts " +
                     std::to_string(hosts.front()->expert_shards) + " expert shards and node '" +
                     n->name + "' " + std::to_string(n->expert_shards) +
                     ": every node hosting expert shards must host as many, to hold as many "
                     "groups");
  }
  return ok_status();
}

// chat_format: one of the formats brigade renders, named as model::parse_chat_format reads them.
void read_chat_format(yaml_section& s, std::optional<model::chat_format>& out) {
  std::string name;
  s.text("chat_format", name);
  if (name.empty()) return;
  out = model::parse_chat_format(name);
  if (!out) s.invalid("chat_format", "'" + name + "' must be one of " + model::chat_format_names());
}

void read_kv_dtype(yaml_section& s, gpu::dtype& out) {
  std::string name;
  s.text("kv_dtype", name);
  if (name.empty()) return;
  auto parsed = model::parse_kv_dtype(name, "kv_dtype");
  if (parsed.ok()) {
    out = parsed.value();
  } else {
    s.invalid("kv_dtype", "'" + name + "' must be one of f32, bf16");
  }
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
  yaml_section top(root, "", source, &err);
  top.begin();
  top.text("model", m.model);
  read_chat_format(top, m.chat_format);
  top.integer("block_tokens", m.block_tokens, 1, 4096);
  read_kv_dtype(top, m.kv_dtype);
  top.child("serve", [&](yaml_section& s) {
    s.text("listen", m.listen);
    read_api_keys(s, m.api_keys);
    s.texts("admin_keys", m.admin_keys);
    s.flag("admin_without_key", m.admin_without_key);
    s.text("model_name", m.served_model_name);
    s.integer("admission_queue", m.admission_queue, 1, 1 << 20);
  });
  top.child("roles", [&](yaml_section& roles) {
    roles.child("prefill", [&](yaml_section& s) {
      s.integer("count", m.prefill.count, 1, 1024);
      s.integer("max_step_tokens", m.prefill.max_step_tokens, 1, 1 << 20);
      s.integer("kv_tokens", m.prefill.kv_tokens, 1, 1 << 28);
      s.device("device", m.prefill.device);
    });
    roles.child("decode", [&](yaml_section& s) {
      s.integer("count", m.decode.count, 1, 1024);
      s.integer("max_running", m.decode.max_running, 1, 4096);
      s.integer("kv_tokens", m.decode.kv_tokens, 1, 1 << 28);
      s.device("device", m.decode.device);
      s.child("speculation",
              [&](yaml_section& spec) { read_speculation(spec, m.decode.speculation); });
    });
    roles.child("expert_shard", [&](yaml_section& s) {
      s.integer("count", m.experts.count, 1, 4096);
      s.integer("slots_per_shard", m.experts.slots_per_shard, 0, 1 << 16);
      s.device("device", m.experts.device);
    });
  });
  top.child("restart", [&](yaml_section& s) {
    s.integer("max_restarts", m.restart.max_restarts, 0, 1 << 20);
    s.number("window_s", m.restart.window_s, 0.001);
    s.integer("backoff_ms", m.restart.backoff_ms, 0, 3600 * 1000);
    s.integer("max_backoff_ms", m.restart.max_backoff_ms, 0, 3600 * 1000);
  });
  top.child("liveness", [&](yaml_section& s) { read_liveness(s, m.liveness); });
  top.child("eplb", [&](yaml_section& s) {
    s.flag("enabled", m.eplb.enabled);
    s.integer64("sample_interval_steps", m.eplb.sample_interval_steps, 1, int64_t{1} << 40);
    s.integer64("replan_interval_steps", m.eplb.replan_interval_steps, 1, int64_t{1} << 40);
    s.number("margin", m.eplb.margin, 0.0);
    s.integer("copy_interval_ms", m.eplb.copy_interval_ms, 0, 60 * 1000);
    s.number("move_budget", m.eplb.move_budget, 0.0);
    s.number("cross_node_copy_cost", m.eplb.cross_node_copy_cost, 1.0);
    s.number("early_replan_above", m.eplb.early_replan_above, 0.0);
    read_group_placement(s, m.eplb.placement);
  });
  top.text("join_secret_file", m.join_secret_file);
  top.child("transport", [&](yaml_section& s) {
    s.text("tls", m.transport.tls);
    s.text("net_devices", m.transport.net_devices);
  });
  top.nodes("nodes", m.nodes);
  top.child("kv_cache", [&](yaml_section& s) { read_kv_cache(s, m.kv_cache); });
  top.finish();
  if (!err.message.empty()) return err;
  if (m.model.empty()) return error(errc::bad_format, source + ": field 'model' is missing");
  if (m.eplb.move_budget <= 0 || m.eplb.move_budget > 1) {
    return error(errc::bad_format, source + ": field 'eplb.move_budget' must be in (0, 1], got " +
                                       std::to_string(m.eplb.move_budget));
  }
  if (m.eplb.replan_interval_steps < m.eplb.sample_interval_steps) {
    return error(errc::bad_format, source + ": field 'eplb.replan_interval_steps' (" +
                                       std::to_string(m.eplb.replan_interval_steps) +
                                       ") is shorter than eplb.sample_interval_steps (" +
                                       std::to_string(m.eplb.sample_interval_steps) + ")");
  }
  status nodes = check_nodes(m, source);
  if (!nodes) return nodes.err();
  status groups = check_group_placement(m, source);
  if (!groups) return groups.err();
  status keys = check_keys(m);
  if (!keys) return keys.err();
  status listen = check_listen(m.listen, source);
  if (!listen) return listen.err();
  return m;
}

// Errors name entries by index, never by the key: they end up in logs.
status check_keys(const manifest& m) {
  auto bad = [&](const std::string& what) {
    return error(errc::bad_format, m.source + ": " + what);
  };
  std::map<std::string, std::string> seen;  // Key -> the entry that holds it.
  for (size_t i = 0; i < m.api_keys.size(); ++i) {
    const std::string at = "serve.api_keys[" + std::to_string(i) + "]";
    auto [it, fresh] = seen.emplace(m.api_keys[i].key, at);
    if (!fresh) return bad("field '" + at + "' holds the same key as " + it->second);
  }
  for (size_t i = 0; i < m.admin_keys.size(); ++i) {
    const std::string at = "serve.admin_keys[" + std::to_string(i) + "]";
    auto [it, fresh] = seen.emplace(m.admin_keys[i], at);
    if (!fresh) {
      return bad("field '" + at + "' holds the same key as " + it->second +
                 "; an admin key must differ from every other key");
    }
  }
  return ok_status();
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

}  // namespace brigade::config

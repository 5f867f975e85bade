#include "chaos/scenario.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/yaml_section.hpp"

namespace brigade::chaos {
namespace {

using config::yaml_section;

const std::set<std::string> role_kinds = {"prefill", "decode", "expert_shard", "kv_store"};

std::string read_file(const std::string& path, error* err) {
  std::ifstream in(path);
  if (!in) {
    *err = error(errc::not_found, path + ": cannot open it");
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

void read_model(yaml_section& top, topology_spec& t, const std::string& base_dir) {
  top.raw("model", [&](const YAML::Node& n) {
    if (n.IsScalar()) {
      t.model_dir = resolve(base_dir, n.Scalar());
      return;
    }
    yaml_section m(n, top.path() + "model.", top.source(), top.err());
    m.begin();
    model::model_spec& s = t.make;
    m.text("family", s.family);
    m.integer("layers", s.layers, 1, 64);
    m.integer("hidden", s.hidden, 8, 4096);
    m.integer("heads", s.heads, 1, 64);
    m.integer("kv_heads", s.kv_heads, 1, 64);
    m.integer("head_dim", s.head_dim, 4, 256);
    m.integer("experts", s.experts, 1, 512);
    m.integer("top_k", s.top_k, 1, 64);
    m.integer("moe_inter", s.moe_inter, 4, 8192);
    m.integer("vocab", s.vocab, 300, 262144);
    m.integer("max_positions", s.max_positions, 64, 1 << 20);
    int seed = 0;
    m.integer("seed", seed, 0, 1 << 30);
    s.seed = static_cast<uint64_t>(seed);
    m.finish();
  });
}

// The small random model runs are made with unless a scenario says otherwise: quick to load and
// to run on two cores, with enough experts for shards to spread.
model::model_spec default_model() {
  model::model_spec s;
  s.layers = 2;
  s.hidden = 64;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.experts = 12;
  s.top_k = 2;
  s.moe_inter = 32;
  s.vocab = 2048;
  s.max_positions = 2048;
  s.dtype = "float32";
  s.seed = 5;
  return s;
}

void read_topology(yaml_section& top, topology_spec& t, const std::string& base_dir) {
  t.make = default_model();
  top.child("topology", [&](yaml_section& s) {
    read_model(s, t, base_dir);
    s.integer("nodes", t.nodes, 1, 16);
    s.bytes("ssd_fs", t.ssd_fs_bytes);
    s.raw("manifest", [&](const YAML::Node& n) {
      if (n.IsScalar()) {
        t.manifest_yaml = read_file(resolve(base_dir, n.Scalar()), s.err());
      } else if (n.IsMap()) {
        YAML::Emitter out;
        out << n;
        t.manifest_yaml = out.c_str();
      } else {
        s.invalid("manifest", "must be a mapping (the manifest inline) or a path to one");
      }
    });
  });
}

template <class Enum>
void choice(yaml_section& s, const char* key, Enum& out,
            const std::vector<std::pair<std::string, Enum>>& options) {
  std::string text;
  s.raw(key, [&](const YAML::Node& n) {
    std::string known;
    for (const auto& [name, value] : options) {
      known += (known.empty() ? "" : ", ") + name;
      if (n.IsScalar() && n.Scalar() == name) {
        out = value;
        return;
      }
    }
    s.invalid(key, "must be one of " + known);
  });
}

void read_workload(yaml_section& top, workload_spec& w, const std::string& base_dir) {
  top.child("workload", [&](yaml_section& s) {
    s.raw("prompts", [&](const YAML::Node& n) {
      if (n.IsScalar() && n.Scalar() == "generated") return;
      yaml_section p(n, s.path() + "prompts.", s.source(), s.err());
      p.begin();
      std::string file, trace;
      p.text("file", file);
      p.text("trace", trace);
      p.integer("block_tokens", w.trace_block_tokens, 1, 512);
      p.number("time_scale", w.trace_time_scale, 0.0);
      p.finish();
      if (!file.empty() && !trace.empty()) p.invalid("file", "and 'trace' exclude each other");
      if (!file.empty()) {
        w.prompts = workload_spec::source::file;
        w.path = resolve(base_dir, file);
      } else if (!trace.empty()) {
        w.prompts = workload_spec::source::trace;
        w.path = resolve(base_dir, trace);
      }
    });
    s.integer("requests", w.requests, 1, 1 << 20);
    s.integer("concurrency", w.concurrency, 1, 4096);
    s.number("rate_per_s", w.rate_per_s, 0.0);
    s.integer("min_prompt_tokens", w.min_prompt_tokens, 1, 1 << 16);
    s.integer("max_prompt_tokens", w.max_prompt_tokens, 1, 1 << 16);
    s.integer("shared_prefix_tokens", w.shared_prefix_tokens, 0, 1 << 16);
    s.integer("max_tokens", w.max_tokens, 1, 1 << 16);
    choice(s, "sampling", w.draw,
           {{"greedy", workload_spec::sampling::greedy},
            {"seeded", workload_spec::sampling::seeded},
            {"mixed", workload_spec::sampling::mixed}});
    s.number("temperature", w.temperature, 0.01);
    s.number("top_p", w.top_p, 0.01);
    s.text("scenario", w.scenario);
    s.raw("stream", [&](const YAML::Node& n) {
      bool flag = false;
      if (YAML::convert<bool>::decode(n, flag)) {
        w.stream = flag ? workload_spec::streaming::yes : workload_spec::streaming::no;
      } else if (n.IsScalar() && n.Scalar() == "mixed") {
        w.stream = workload_spec::streaming::mixed;
      } else {
        s.invalid("stream", "must be true, false or mixed");
      }
    });
    if (s.ok() && w.min_prompt_tokens > w.max_prompt_tokens) {
      s.invalid("min_prompt_tokens", "is larger than max_prompt_tokens");
    }
    if (s.ok() && w.top_p > 1.0) s.invalid("top_p", "must be at most 1");
  });
}

void read_time(yaml_section& f, fault_time& t) {
  f.raw("at", [&](const YAML::Node& n) {
    int64_t ms = 0;
    if (n.IsScalar() && n.Scalar() == "migration") {
      t.when = fault_time::kind::migration;
      return;
    }
    if (n.IsScalar() && config::parse_duration_ms(n.Scalar(), ms)) {
      t.when = fault_time::kind::at;
      t.ms = ms;
      return;
    }
    if (!n.IsMap()) {
      return f.invalid("at",
                       "must be a time (1.5s), 'migration', {tokens: N}, {after: 2s} or "
                       "{random: [1s, 5s]}");
    }
    yaml_section a(n, f.path() + "at.", f.source(), f.err());
    a.begin();
    int64_t tokens = -1, after = -1;
    a.integer64("tokens", tokens, 0, int64_t{1} << 40);
    a.duration_ms("after", after, 0, int64_t{24} * 3600 * 1000);
    a.raw("random", [&](const YAML::Node& r) {
      int64_t from = 0, to = 0;
      if (!r.IsSequence() || r.size() != 2 || !r[0].IsScalar() || !r[1].IsScalar() ||
          !config::parse_duration_ms(r[0].Scalar(), from) ||
          !config::parse_duration_ms(r[1].Scalar(), to) || from > to) {
        return a.invalid("random", "must be [FROM, TO], two times with FROM <= TO");
      }
      t.when = fault_time::kind::random;
      t.from_ms = from;
      t.to_ms = to;
    });
    a.finish();
    if (tokens >= 0) {
      t.when = fault_time::kind::tokens;
      t.tokens = tokens;
    } else if (after >= 0) {
      t.when = fault_time::kind::after;
      t.ms = after;
    } else if (t.when != fault_time::kind::random && a.ok()) {
      a.invalid("tokens", "is missing: give tokens, after or random");
    }
  });
}

// "coordinator", or {node: n1}, {role: decode}, {actor: decode-0}; the mapping may hold the
// action's own options too, which `more` reads.
void read_target(yaml_section& f, const char* key, fault_spec& spec,
                 const std::function<void(yaml_section&)>& more) {
  f.raw(key, [&](const YAML::Node& n) {
    if (n.IsScalar() && n.Scalar() == "coordinator") {
      spec.target.what = fault_target::kind::coordinator;
      return;
    }
    if (!n.IsMap()) {
      return f.invalid(key, "must be 'coordinator' or a mapping naming a node, role or actor");
    }
    yaml_section t(n, f.path() + key + ".", f.source(), f.err());
    t.begin();
    std::string node, role, actor;
    t.text("node", node);
    t.text("role", role);
    t.text("actor", actor);
    if (more) more(t);
    t.finish();
    const int named = !node.empty() + !role.empty() + !actor.empty();
    if (t.ok() && named > 1) t.invalid("node", "node, role and actor exclude each other");
    if (!role.empty() && !role_kinds.count(role)) {
      t.invalid("role", "must be prefill, decode, expert_shard or kv_store");
    }
    if (!node.empty()) spec.target = {fault_target::kind::node, node};
    if (!role.empty()) spec.target = {fault_target::kind::role, role};
    if (!actor.empty()) spec.target = {fault_target::kind::actor, actor};
  });
}

fault_spec read_fault(const YAML::Node& n, const std::string& path, const std::string& source,
                      error* err) {
  fault_spec spec;
  yaml_section f(n, path, source, err);
  f.begin();
  read_time(f, spec.time);
  f.duration_ms("for", spec.for_ms, 0, int64_t{24} * 3600 * 1000);
  const std::vector<std::pair<const char*, fault_spec::kind>> actions = {
      {"kill", fault_spec::kind::kill},       {"stop", fault_spec::kind::stop},
      {"term", fault_spec::kind::term},       {"partition", fault_spec::kind::partition},
      {"network", fault_spec::kind::network}, {"disk", fault_spec::kind::disk},
      {"restart", fault_spec::kind::restart}, {"replan", fault_spec::kind::replan}};
  int given = 0;
  for (const auto& [key, kind] : actions) {
    if (n.IsMap() && n[key]) {
      ++given;
      spec.action = kind;
    }
  }
  read_target(f, "kill", spec, {});
  read_target(f, "stop", spec, {});
  read_target(f, "term", spec, {});
  read_target(f, "restart", spec, {});
  read_target(f, "partition", spec, [&](yaml_section& t) {
    t.text("from", spec.from);
    t.text("plane", spec.plane);
    if (spec.plane != "control" && spec.plane != "data" && spec.plane != "both") {
      t.invalid("plane", "must be control, data or both");
    }
  });
  read_target(f, "network", spec, [&](yaml_section& t) {
    t.text("peer", spec.from);
    t.number("drop", spec.drop, 0.0);
    t.number("duplicate", spec.duplicate, 0.0);
    t.number("reorder", spec.reorder, 0.0);
    t.duration_ms("delay", spec.delay_ms, 0, 60000);
    for (double share : {spec.drop, spec.duplicate, spec.reorder}) {
      if (share > 1.0) t.invalid("drop", "shares (drop, duplicate, reorder) must be at most 1");
    }
  });
  read_target(f, "disk", spec, [&](yaml_section& t) {
    t.flag("full", spec.disk_full);
    t.duration_ms("slow", spec.disk_slow_ms, 0, 60000);
    t.integer("corrupt", spec.disk_corrupt_blocks, 0, 1 << 20);
  });
  f.child("replan", [&](yaml_section& r) {
    int seed = 1;
    r.integer("seed", seed, 0, 1 << 30);
    spec.replan_seed = static_cast<uint64_t>(seed);
  });
  f.finish();
  if (f.ok() && given != 1) {
    f.invalid("kill",
              "each fault needs exactly one of kill, stop, term, partition, network, "
              "disk, restart or replan");
  }
  const bool needs_node = spec.action == fault_spec::kind::partition ||
                          spec.action == fault_spec::kind::network ||
                          spec.action == fault_spec::kind::disk;
  if (f.ok() && needs_node && spec.target.what != fault_target::kind::node) {
    f.invalid("partition", "partition, network and disk faults name a node: {node: n2, ...}");
  }
  if (f.ok() && spec.action == fault_spec::kind::partition && spec.plane != "data" &&
      spec.from != "coordinator" && spec.from != "all") {
    f.invalid("partition",
              "a node talks to other nodes' control planes through the coordinator: "
              "a partition from a node is of plane: data");
  }
  if (f.ok() && (spec.action == fault_spec::kind::stop || spec.action == fault_spec::kind::term) &&
      (spec.target.what == fault_target::kind::role ||
       spec.target.what == fault_target::kind::actor)) {
    f.invalid("stop", "stops a process: a node or the coordinator");
  }
  if (f.ok() && spec.action == fault_spec::kind::restart &&
      spec.target.what != fault_target::kind::node &&
      spec.target.what != fault_target::kind::coordinator) {
    f.invalid("restart", "restarts a process: a node or the coordinator");
  }
  YAML::Emitter out;
  out << YAML::Flow << n;
  spec.text = out.c_str();
  return spec;
}

void read_checks(yaml_section& top, checks_spec& c) {
  top.child("checks", [&](yaml_section& s) {
    s.integer("errors_allowed", c.errors_allowed, 0, 1 << 20);
    s.flag("identical", c.identical);
    s.duration_ms("detect", c.detect_ms, 0, 3600000);
    s.duration_ms("serve_again", c.serve_again_ms, 0, 3600000);
    s.duration_ms("exit", c.exit_ms, 0, 3600000);
    s.flag("kv_leaks", c.kv_leaks);
    s.number("memory_growth", c.memory_growth, 0.0);
  });
}

}  // namespace

result<scenario> parse_scenario(const std::string& yaml, const std::string& source,
                                const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return error(errc::bad_format, source + ": not valid YAML: " + e.what());
  }
  scenario s;
  s.source = source;
  error err;
  yaml_section top(root, "", source, &err);
  top.begin();
  top.text("name", s.name);
  top.text("about", s.about);
  read_topology(top, s.topology, base_dir);
  read_workload(top, s.workload, base_dir);
  top.raw("faults", [&](const YAML::Node& n) {
    if (!n.IsSequence()) return top.invalid("faults", "must be a list of faults");
    for (size_t i = 0; i < n.size() && err.message.empty(); ++i) {
      s.faults.push_back(read_fault(n[i], "faults[" + std::to_string(i) + "].", source, &err));
    }
  });
  read_checks(top, s.checks);
  top.finish();
  if (!err.message.empty()) return err;
  if (s.name.empty()) return error(errc::bad_format, source + ": field 'name' is missing");
  if (s.topology.manifest_yaml.empty()) {
    return error(errc::bad_format, source + ": field 'topology.manifest' is missing");
  }
  // The manifest must stand as one once completed: check it now, with stand-in addresses.
  const auto names = node_names(s);
  if (names.empty()) {
    return error(errc::bad_format, source +
                                       ": the manifest lists no nodes; list them under "
                                       "topology.manifest.nodes, or give topology.nodes");
  }
  std::vector<std::string> addresses;
  for (size_t i = 0; i < names.size(); ++i)
    addresses.push_back("127.0.0.1:" + std::to_string(40000 + i));
  auto m = complete_manifest(s, "/nonexistent-model", addresses, "/dev/null", "key", nullptr);
  if (!m) return error(m.err().code, source + ": topology.manifest: " + m.err().message);
  for (const auto& f : s.faults) {
    const bool names_node =
        f.target.what == fault_target::kind::node && f.action != fault_spec::kind::replan;
    if (names_node && std::find(names.begin(), names.end(), f.target.name) == names.end()) {
      return error(errc::bad_format, source + ": fault " + f.text + " names node '" +
                                         f.target.name + "', which the topology does not have");
    }
  }
  return s;
}

result<scenario> load_scenario(const std::string& path) {
  error err;
  const std::string text = read_file(path, &err);
  if (!err.message.empty()) return err;
  const auto slash = path.rfind('/');
  return parse_scenario(text, path, slash == std::string::npos ? "." : path.substr(0, slash));
}

std::vector<std::string> node_names(const scenario& s) {
  std::vector<std::string> names;
  YAML::Node root;
  try {
    root = YAML::Load(s.topology.manifest_yaml);
  } catch (const YAML::Exception&) {
    return names;
  }
  if (root.IsMap() && root["nodes"] && root["nodes"].IsSequence()) {
    for (const auto& n : root["nodes"]) {
      if (n.IsMap() && n["name"] && n["name"].IsScalar()) names.push_back(n["name"].Scalar());
    }
    return names;
  }
  for (int i = 1; i <= s.topology.nodes; ++i)
    names.push_back("n" + std::to_string(i));
  return names;
}

namespace {

// Spreads the manifest's role counts over `count` nodes in turn (shards first, so that every
// node holds some), for a manifest that lists no nodes.
YAML::Node spread_roles(const YAML::Node& root, size_t count) {
  auto count_of = [&](const char* role, int fallback) {
    const YAML::Node r = root["roles"];
    if (r && r[role] && r[role]["count"]) return r[role]["count"].as<int>();
    return fallback;
  };
  const int prefill = count_of("prefill", 1), decode = count_of("decode", 1);
  const int shards = count_of("expert_shard", 4);
  std::vector<std::map<std::string, int>> per(count);
  size_t next = 0;
  auto place = [&](const char* role, int n) {
    for (int i = 0; i < n; ++i)
      ++per[next++ % count][role];
  };
  place("expert_shard", shards);
  place("decode", decode);
  place("prefill", prefill);
  YAML::Node nodes(YAML::NodeType::Sequence);
  for (size_t i = 0; i < count; ++i) {
    YAML::Node n;
    n["name"] = "n" + std::to_string(i + 1);
    for (const auto& [role, k] : per[i])
      n["roles"][role] = k;
    nodes.push_back(n);
  }
  return nodes;
}

}  // namespace

result<config::manifest> complete_manifest(const scenario& s, const std::string& model_dir,
                                           const std::vector<std::string>& addresses,
                                           const std::string& secret_file,
                                           const std::string& api_key, std::string* yaml_out) {
  YAML::Node root;
  try {
    root = YAML::Load(s.topology.manifest_yaml);
  } catch (const YAML::Exception& e) {
    return error(errc::bad_format, std::string("not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) return error(errc::bad_format, "must be a mapping");
  if (!root["nodes"]) root["nodes"] = spread_roles(root, addresses.size());
  YAML::Node nodes = root["nodes"];
  if (!nodes.IsSequence() || nodes.size() != addresses.size()) {
    return error(errc::bad_format, "needs one node per address");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].IsMap()) return error(errc::bad_format, "nodes must be mappings");
    nodes[i]["address"] = addresses[i];
  }
  // Roles counted per node: the counts under roles are the nodes' sums.
  if (root["roles"]) {
    for (const char* role : {"prefill", "decode", "expert_shard"}) {
      if (root["roles"][role] && root["roles"][role]["count"]) root["roles"][role].remove("count");
    }
  }
  root["model"] = model_dir;
  root["join_secret_file"] = secret_file;
  if (!root["transport"]) {
    root["transport"]["tls"] = "tcp";
    root["transport"]["net_devices"] = "lo";
  }
  root["serve"]["api_keys"].reset();
  root["serve"]["api_keys"].push_back(api_key);
  YAML::Emitter out;
  out << root;
  const std::string text = out.c_str();
  if (yaml_out) *yaml_out = text;
  return config::parse_manifest(text, s.source + " (manifest)");
}

std::string describe(const fault_spec& f) {
  std::string target;
  switch (f.target.what) {
    case fault_target::kind::coordinator:
      target = "the coordinator";
      break;
    case fault_target::kind::node:
      target = "node " + f.target.name;
      break;
    case fault_target::kind::role:
      target = "a " + f.target.name;
      break;
    case fault_target::kind::actor:
      target = f.target.name;
      break;
  }
  const std::string lasting = f.for_ms > 0 ? " for " + std::to_string(f.for_ms) + " ms" : "";
  switch (f.action) {
    case fault_spec::kind::kill:
      return "kill " + target;
    case fault_spec::kind::stop:
      return "stop " + target + lasting;
    case fault_spec::kind::term:
      return "SIGTERM to " + target;
    case fault_spec::kind::partition:
      return "partition " + target + " from " + f.from + " (" + f.plane + " plane" +
             (f.plane == "both" ? "s" : "") + ")" + lasting;
    case fault_spec::kind::network: {
      std::string what;
      if (f.drop > 0) what += " drop " + std::to_string(f.drop).substr(0, 4);
      if (f.duplicate > 0) what += " duplicate " + std::to_string(f.duplicate).substr(0, 4);
      if (f.reorder > 0) what += " reorder " + std::to_string(f.reorder).substr(0, 4);
      if (f.delay_ms > 0) what += " delay " + std::to_string(f.delay_ms) + " ms";
      return "data plane of " + target + ":" + what + lasting;
    }
    case fault_spec::kind::disk:
      return std::string("disk of ") + target + ": " +
             (f.disk_full          ? "full"
              : f.disk_slow_ms > 0 ? "slow (" + std::to_string(f.disk_slow_ms) + " ms per I/O)"
                                   : std::to_string(f.disk_corrupt_blocks) + " blocks corrupted") +
             lasting;
    case fault_spec::kind::restart:
      return "restart " + target;
    case fault_spec::kind::replan:
      return "re-plan the experts (seed " + std::to_string(f.replan_seed) + ")";
  }
  return "?";
}

}  // namespace brigade::chaos

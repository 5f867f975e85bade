// `brigade plan-experts`: plans a layout of logical experts onto physical expert slots from a
// file of measured loads, the way the supervisor does every re-plan interval; with --groups, each
// expert group of a group-limited router stays on one node.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "eplb/balance_metrics.hpp"
#include "eplb/expert_groups.hpp"
#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"
#include "eplb/planner.hpp"

namespace brigade::cli {

namespace {

result<std::string> read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return error(errc::not_found, std::string(what) + " file '" + path + "' cannot be opened");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int fail(const error& e) {
  std::fprintf(stderr, "brigade plan-experts: %s\n", e.describe().c_str());
  return 1;
}

/// With groups per node: how many groups each node holds, and which node each group is on.
void add_groups_json(const eplb::layout& planned, const eplb::planner_options& o,
                     nlohmann::json& out) {
  out["expert_groups"] = o.expert_groups;
  out["nodes"] = o.nodes;
  if (!o.groups_per_node) {
    out["groups_per_node"] = nullptr;
    return;
  }
  out["groups_per_node"] = o.expert_groups / o.nodes;
  nlohmann::json group_node = nlohmann::json::array();
  for (int layer = 0; layer < planned.layers(); ++layer)
    group_node.push_back(eplb::group_nodes_of(planned, layer, o.nodes, o.expert_groups));
  out["group_node"] = std::move(group_node);
}

void print_json(const eplb::layout& planned, const eplb::planner_options& o,
                const eplb::balance_report& b, int moved, double plan_ms) {
  nlohmann::json out;
  out["phy2log"] = planned.phy2log();
  nlohmann::json counts = nlohmann::json::array();
  for (int layer = 0; layer < planned.layers(); ++layer) {
    std::vector<int> row;
    for (int e = 0; e < planned.experts(); ++e)
      row.push_back(planned.replica_count(layer, e));
    counts.push_back(row);
  }
  out["replica_count"] = std::move(counts);
  out["experts"] = planned.experts();
  out["shards"] = planned.shards();
  out["slots_per_shard"] = planned.slots_per_shard();
  out["epoch"] = planned.epoch();
  out["balancedness"] = b.balancedness;
  out["max_over_mean"] = b.max_over_mean;
  out["layer_max_over_mean"] = b.layer_max_over_mean;
  out["worst_layer_max_over_mean"] = b.worst_layer_max_over_mean;
  out["moved_slots"] = moved;
  out["plan_ms"] = plan_ms;
  add_groups_json(planned, o, out);
  std::printf("%s\n", out.dump().c_str());
}

void print_summary(const eplb::layout& planned, const eplb::planner_options& o,
                   const eplb::balance_report& b, int moved, double plan_ms) {
  std::printf("planned %d layers x %d experts onto %d shards x %d slots (epoch %llu)\n",
              planned.layers(), planned.experts(), planned.shards(), planned.slots_per_shard(),
              static_cast<unsigned long long>(planned.epoch()));
  std::printf("  balancedness (summed over layers)   %.4f\n", b.balancedness);
  std::printf("  max/mean (summed over layers)       %.4f\n", b.max_over_mean);
  std::printf("  max/mean per layer (step time)      %.4f\n", b.layer_max_over_mean);
  std::printf("  max/mean of the worst layer         %.4f\n", b.worst_layer_max_over_mean);
  std::printf("  slots moved                          %d of %d\n", moved,
              planned.layers() * planned.slots());
  std::printf("  planner time                         %.2f ms\n", plan_ms);
  if (o.groups_per_node) {
    std::printf(
        "  groups per node                      %d (%d groups on %d nodes, each group's "
        "replicas on one node)\n",
        o.expert_groups / o.nodes, o.expert_groups, o.nodes);
  }
  std::printf("(--json prints the layout)\n");
}

}  // namespace

int plan_experts(int argc, char** argv) {
  CLI::App app{"Plan a layout of logical experts onto physical expert slots.",
               "brigade plan-experts"};
  app.option_defaults()->always_capture_default();
  std::string load_path;
  std::string current_path;
  eplb::planner_options options;
  bool json = false;
  app.add_option("--load", load_path, "JSON file {\"load\": [[tokens per expert] per layer]}")
      ->required();
  // Required options have no default to show.
  app.add_option("--shards", options.shards, "expert shards")->required()->default_str("");
  app.add_option("--slots-per-shard", options.slots_per_shard, "physical expert slots per shard")
      ->required()
      ->default_str("");
  app.add_option("--nodes", options.nodes,
                 "nodes the shards are spread over; replicas of an expert are spread over them "
                 "(with --groups, a group's replicas all stay on one)");
  app.add_option("--current", current_path,
                 "layout in use (JSON with \"phy2log\", e.g. an earlier --json output); the "
                 "plan then moves only the slots the balance gain needs");
  app.add_option("--keep-slack", options.keep_slack,
                 "with --current, how far above the best balance (fraction of the mean shard "
                 "load) a layer may stay to keep its slots");
  app.add_option("--max-moved", options.max_moved_fraction,
                 "with --current, the largest fraction of each layer's slots one plan may move");
  auto* groups =
      app.add_option("--groups", options.expert_groups,
                     "expert groups of a group-limited router (the model's n_group), each kept "
                     "with all its replicas on one node, groups balanced over --nodes")
          ->check(CLI::PositiveNumber)
          ->default_str("");
  app.add_flag("--json", json, "print one JSON object with the layout and its figures");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  options.groups_per_node = groups->count() > 0;

  auto text = read_text(load_path, "load");
  if (!text) return fail(text.err());
  auto load = eplb::load_matrix_from_json(*text);
  if (!load) return fail(error(load.err().code, load_path + ": " + load.err().message));
  if (status s = eplb::validate_plan_input(*load, options, nullptr); !s) return fail(s.err());

  std::optional<eplb::layout> current;
  if (!current_path.empty()) {
    auto current_text = read_text(current_path, "current layout");
    if (!current_text) return fail(current_text.err());
    const eplb::layout_shape shape{static_cast<int>(load->size()),
                                   static_cast<int>(load->front().size()), options.shards,
                                   options.slots_per_shard};
    auto parsed = eplb::layout_from_json(*current_text, shape);
    if (!parsed) return fail(error(parsed.err().code, current_path + ": " + parsed.err().message));
    current = std::move(*parsed);
  }

  const auto start = std::chrono::steady_clock::now();
  auto planned = eplb::plan_layout(*load, options, current ? &*current : nullptr);
  const double plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!planned) return fail(planned.err());

  const eplb::balance_report balance = eplb::measure_balance(*planned, *load);
  const int moved = current ? eplb::moved_slots(*current, *planned) : 0;
  if (json) {
    print_json(*planned, options, balance, moved, plan_ms);
  } else {
    print_summary(*planned, options, balance, moved, plan_ms);
  }
  return 0;
}

}  // namespace brigade::cli

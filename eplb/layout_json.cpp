// JSON form of a layout, kept apart from layout.cpp so that only code that reads or writes files
// pays for nlohmann/json.
#include <nlohmann/json.hpp>
#include <utility>

#include "eplb/layout.hpp"

namespace brigade::eplb {

namespace {

using nlohmann::json;

/// Checks an optional integer shape field against the expected value.
status check_shape_field(const json& doc, const char* key, int expected) {
  if (!doc.contains(key)) return ok_status();
  const json& v = doc[key];
  if (!v.is_number_integer() || v.get<long long>() != expected) {
    return error(errc::invalid_argument, std::string("layout field \"") + key + "\" is " +
                                             v.dump() + " but the plan needs " +
                                             std::to_string(expected));
  }
  return ok_status();
}

result<std::vector<std::vector<int32_t>>> parse_phy2log(const json& doc) {
  if (!doc.contains("phy2log") || !doc["phy2log"].is_array()) {
    return error(errc::bad_format, "layout needs \"phy2log\": an array of per-layer slot arrays");
  }
  std::vector<std::vector<int32_t>> phy2log;
  for (const json& row : doc["phy2log"]) {
    if (!row.is_array()) {
      return error(errc::bad_format, "layout \"phy2log\" row " + std::to_string(phy2log.size()) +
                                         " is not an array of expert ids");
    }
    std::vector<int32_t> slots;
    slots.reserve(row.size());
    for (const json& v : row) {
      if (!v.is_number_integer()) {
        return error(errc::bad_format, "layout \"phy2log\" row " + std::to_string(phy2log.size()) +
                                           " holds " + v.dump() + ", not an expert id");
      }
      const long long id = v.get<long long>();
      slots.push_back(id < INT32_MIN || id > INT32_MAX ? -1 : static_cast<int32_t>(id));
    }
    phy2log.push_back(std::move(slots));
  }
  return phy2log;
}

}  // namespace

std::string layout_to_json(const layout& l) {
  json doc;
  doc["experts"] = l.experts();
  doc["shards"] = l.shards();
  doc["slots_per_shard"] = l.slots_per_shard();
  doc["epoch"] = l.epoch();
  doc["phy2log"] = l.phy2log();
  json log2phy = json::array();
  json replicas = json::array();
  for (int layer = 0; layer < l.layers(); ++layer) {
    json layer_slots = json::array();
    json layer_counts = json::array();
    for (int e = 0; e < l.experts(); ++e) {
      const slot_list slots = l.log2phy(layer, e);
      layer_slots.push_back(std::vector<int32_t>(slots.begin(), slots.end()));
      layer_counts.push_back(slots.size());
    }
    log2phy.push_back(std::move(layer_slots));
    replicas.push_back(std::move(layer_counts));
  }
  doc["log2phy"] = std::move(log2phy);
  doc["replica_count"] = std::move(replicas);
  return doc.dump();
}

result<layout> layout_from_json(const std::string& text, const layout_shape& expected) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return error(errc::bad_format, "layout is not a JSON object");
  }
  for (auto [key, want] : {std::pair<const char*, int>{"experts", expected.experts},
                           {"shards", expected.shards},
                           {"slots_per_shard", expected.slots_per_shard}}) {
    if (status s = check_shape_field(doc, key, want); !s) return s.err();
  }
  uint64_t epoch = 0;
  if (doc.contains("epoch")) {
    if (!doc["epoch"].is_number_unsigned()) {
      return error(errc::bad_format, "layout \"epoch\" must be a non-negative integer");
    }
    epoch = doc["epoch"].get<uint64_t>();
  }
  auto phy2log = parse_phy2log(doc);
  if (!phy2log) return phy2log.err();
  return layout::from_phy2log(expected, std::move(*phy2log), epoch);
}

}  // namespace brigade::eplb

#include "kvcache/mooncake_trace.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace brigade::kvcache {

namespace {

using json = nlohmann::json;

/// A line longer than this is not a trace line; refusing it bounds the parser's memory.
constexpr std::size_t max_line_bytes = 64u << 20;

std::string where(const std::string& source, std::size_t line) {
  return source + ":" + std::to_string(line) + ": ";
}

result<std::int64_t> integer_field(const json& obj, const char* name, std::int64_t min) {
  auto it = obj.find(name);
  if (it == obj.end()) return error(errc::bad_format, std::string("missing field '") + name + "'");
  if (!it->is_number_integer() || it->get<std::int64_t>() < min) {
    return error(errc::bad_format, std::string("field '") + name + "' must be an integer >= " +
                                       std::to_string(min) + ", got " + it->dump());
  }
  return it->get<std::int64_t>();
}

result<trace_request> parse_request(const json& obj) {
  if (!obj.is_object()) return error(errc::bad_format, "expected a JSON object");
  trace_request r;
  auto ts = integer_field(obj, "timestamp", 0);
  if (!ts) return ts.err();
  auto in = integer_field(obj, "input_length", 1);
  if (!in) return in.err();
  auto out = integer_field(obj, "output_length", 0);
  if (!out) return out.err();
  r.timestamp_ms = *ts;
  r.input_tokens = *in;
  r.output_tokens = *out;
  auto ids = obj.find("hash_ids");
  if (ids == obj.end() || !ids->is_array()) {
    return error(errc::bad_format, "field 'hash_ids' must be an array of block ids");
  }
  for (const auto& id : *ids) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0) {
      return error(errc::bad_format,
                   "hash_ids holds " + id.dump() + ": block ids are non-negative integers");
    }
    r.hash_ids.push_back(id.get<std::int64_t>());
  }
  const auto blocks = static_cast<std::size_t>(
      (r.input_tokens + static_cast<std::int64_t>(mooncake_block_tokens) - 1) /
      static_cast<std::int64_t>(mooncake_block_tokens));
  if (r.hash_ids.size() != blocks) {
    return error(errc::bad_format, "input_length " + std::to_string(r.input_tokens) + " needs " +
                                       std::to_string(blocks) + " hash_ids of 512 tokens, got " +
                                       std::to_string(r.hash_ids.size()));
  }
  return r;
}

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

result<std::vector<trace_request>> parse_mooncake_trace(std::istream& in,
                                                        const std::string& source) {
  std::vector<trace_request> requests;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.size() > max_line_bytes) {
      return error(errc::bad_format, where(source, line_no) + "line longer than 64 MiB");
    }
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::exception& e) {  // parse errors, and numbers too large (1e999)
      return error(errc::bad_format, where(source, line_no) + "not valid JSON: " + e.what());
    }
    auto r = parse_request(obj);
    if (!r) return error(errc::bad_format, where(source, line_no) + r.err().message);
    if (!requests.empty() && r->timestamp_ms < requests.back().timestamp_ms) {
      return error(errc::bad_format, where(source, line_no) + "timestamp " +
                                         std::to_string(r->timestamp_ms) +
                                         " is earlier than the line before: the trace must be "
                                         "sorted by arrival time");
    }
    requests.push_back(std::move(r).value());
  }
  if (in.bad())
    return error(errc::io_error, source + ": read failed after line " + std::to_string(line_no));
  return requests;
}

result<std::vector<trace_request>> load_mooncake_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(errc::not_found, "cannot open trace file '" + path + "'");
  return parse_mooncake_trace(in, path);
}

std::vector<std::int32_t> synthesize_prompt(const trace_request& request) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(request.input_tokens));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<std::uint64_t>(request.hash_ids[i / mooncake_block_tokens]);
    const std::uint64_t offset = i % mooncake_block_tokens;
    // Token ids in [0, 2^31): a vocabulary this large keeps unequal blocks unequal.
    tokens[i] = static_cast<std::int32_t>(mix64(id * mooncake_block_tokens + offset) >> 33);
  }
  return tokens;
}

}  // namespace brigade::kvcache

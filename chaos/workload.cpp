#include "chaos/workload.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "kvcache/mooncake_trace.hpp"

namespace brigade::chaos {
namespace {

// Token ids drawn for prompts stay clear of the low ids (bytes, specials of small tokenizers)
// and of the last ones (added tokens).
struct id_range {
  int32_t low = 32;
  int32_t high = 0;  // exclusive
};

id_range ids_for(int vocab) {
  id_range r;
  r.high = std::max(r.low + 1, vocab - 64);
  return r;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, id_range r, int count) {
  std::uniform_int_distribution<int32_t> pick(r.low, r.high - 1);
  std::vector<int32_t> out(static_cast<size_t>(count));
  for (auto& t : out)
    t = pick(rng);
  return out;
}

// Sampling, streaming and arrival, drawn per request.
void decorate(const workload_spec& w, std::mt19937_64& rng, request_spec& r, double& clock_ms) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const bool sampled = w.draw == workload_spec::sampling::seeded ||
                       (w.draw == workload_spec::sampling::mixed && unit(rng) < 0.5);
  if (sampled) {
    r.temperature = w.temperature;
    r.top_p = w.top_p;
    r.seed = rng() % 1000000;
  }
  r.stream = w.stream == workload_spec::streaming::yes ||
             (w.stream == workload_spec::streaming::mixed && unit(rng) < 0.5);
  r.scenario = w.scenario;
  if (w.rate_per_s > 0) {
    clock_ms += std::exponential_distribution<double>(w.rate_per_s)(rng) * 1000.0;
    r.arrival_ms = static_cast<int64_t>(clock_ms);
  }
}

// Fits prompt plus output into the context.
void fit(request_spec& r, int max_positions) {
  const int room = max_positions - 2;
  if (static_cast<int>(r.prompt.size()) > room - 1) r.prompt.resize(static_cast<size_t>(room - 1));
  r.max_tokens = std::max(1, std::min(r.max_tokens, room - static_cast<int>(r.prompt.size())));
}

result<std::vector<std::vector<int32_t>>> prompts_from_file(const std::string& path,
                                                            const encoder& encode) {
  std::ifstream in(path);
  if (!in) return error(errc::not_found, path + ": cannot open the prompt file");
  std::vector<std::vector<int32_t>> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = path + ":" + std::to_string(number);
    if (j.is_string()) {
      if (!encode) return error(errc::invalid_argument, where + ": text needs a tokenizer");
      out.push_back(encode(j.get<std::string>()));
    } else if (j.is_array() && !j.empty()) {
      std::vector<int32_t> ids;
      for (const auto& v : j) {
        if (!v.is_number_integer()) {
          return error(errc::bad_format, where + ": a prompt is a string or a list of token ids");
        }
        ids.push_back(v.get<int32_t>());
      }
      out.push_back(std::move(ids));
    } else {
      return error(errc::bad_format, where + ": a prompt is a string or a list of token ids");
    }
    if (out.back().empty()) return error(errc::bad_format, where + ": the prompt is empty");
  }
  if (out.empty()) return error(errc::bad_format, path + ": holds no prompt");
  return out;
}

}  // namespace

result<std::vector<request_spec>> make_requests(const workload_spec& w, int vocab,
                                                int max_positions, uint64_t seed,
                                                const encoder& encode) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + 17);
  const id_range ids = ids_for(vocab);
  std::vector<request_spec> out;
  double clock_ms = 0;
  std::vector<std::vector<int32_t>> file_prompts;
  std::vector<kvcache::trace_request> trace;
  if (w.prompts == workload_spec::source::file) {
    auto loaded = prompts_from_file(w.path, encode);
    if (!loaded) return loaded.err();
    file_prompts = std::move(loaded.value());
  } else if (w.prompts == workload_spec::source::trace) {
    auto loaded = kvcache::load_mooncake_trace(w.path);
    if (!loaded) return loaded.err();
    trace = std::move(loaded.value());
    if (trace.empty()) return error(errc::bad_format, w.path + ": the trace is empty");
  }
  const std::vector<int32_t> shared = random_tokens(rng, ids, w.shared_prefix_tokens);
  std::uniform_int_distribution<int> length(w.min_prompt_tokens, w.max_prompt_tokens);
  for (int i = 0; i < w.requests; ++i) {
    request_spec r;
    r.index = i;
    r.max_tokens = w.max_tokens;
    if (w.prompts == workload_spec::source::file) {
      r.prompt = file_prompts[static_cast<size_t>(i) % file_prompts.size()];
    } else if (w.prompts == workload_spec::source::trace) {
      // Each hash id becomes a block of its own tokens: equal ids, equal prefixes.
      const auto& t = trace[static_cast<size_t>(i) % trace.size()];
      for (uint64_t h : t.hash_ids) {
        std::mt19937_64 block_rng(h * 0x9e3779b97f4a7c15ULL + 3);
        const auto block = random_tokens(block_rng, ids, w.trace_block_tokens);
        r.prompt.insert(r.prompt.end(), block.begin(), block.end());
      }
      const int64_t scaled = t.output_tokens * w.trace_block_tokens /
                             static_cast<int64_t>(kvcache::mooncake_block_tokens);
      r.max_tokens = static_cast<int>(std::clamp<int64_t>(scaled, 1, w.max_tokens));
    } else {
      r.prompt = shared;
      const auto own = random_tokens(rng, ids, length(rng));
      r.prompt.insert(r.prompt.end(), own.begin(), own.end());
    }
    for (int32_t& id : r.prompt) {
      if (id < 0 || id >= vocab) id = ids.low + (std::abs(id) % (ids.high - ids.low));
    }
    decorate(w, rng, r, clock_ms);
    if (w.prompts == workload_spec::source::trace && w.trace_time_scale > 0) {
      const auto& t = trace[static_cast<size_t>(i) % trace.size()];
      r.arrival_ms = static_cast<int64_t>(static_cast<double>(t.timestamp_ms) * w.trace_time_scale);
    }
    fit(r, max_positions);
    out.push_back(std::move(r));
  }
  return out;
}

request_spec probe_request(int index, int vocab) {
  request_spec r;
  r.index = index;
  const id_range ids = ids_for(vocab);
  for (int t = 0; t < 6; ++t)
    r.prompt.push_back(ids.low + (index * 131 + t * 37) % (ids.high - ids.low));
  r.max_tokens = 2;
  r.stream = false;
  return r;
}

}  // namespace brigade::chaos

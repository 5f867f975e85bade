#include "bench/speculation_served.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "bench/load_generator.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "deploy/topology.hpp"
#include "model/speculation.hpp"
#include "serve/inference_service.hpp"

namespace brigade::bench {
namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

// Sums over one mode's requests.
struct mode_figures {
  std::string name;
  std::unique_ptr<deploy::topology> topology;
  int64_t next_id = 1;
  int requests = 0;
  int64_t tokens = 0, decoded = 0;  // decoded: the tokens after each answer's first
  double seconds = 0, decode_seconds = 0, first_token_seconds = 0;
  std::vector<double> decode_rates;  // per request, in request order
  std::vector<std::vector<int32_t>> answers;
};

result<std::unique_ptr<deploy::topology>> start(const served_options& o, bool drafting) {
  config::manifest m = config::default_manifest(o.target_dir);
  if (drafting) {
    // As `brigade serve --draft-model DIR` sets it.
    m.decode.speculation.draft = model::draft_kind::model;
    m.decode.speculation.draft_model = o.draft_dir;
    if (m.decode.speculation.max_draft == 0)
      m.decode.speculation.max_draft = model::default_model_drafts;
  }
  return deploy::topology::start(m);
}

// Sends one greedy request and waits for its answer; adds it to `f`.
status ask(mode_figures& f, const std::vector<int32_t>& prompt, int max_tokens, bool timed) {
  serve::generation_request r;
  r.id = f.next_id++;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  auto sink = std::make_shared<answer_sink>();
  const auto sent = clock_type::now();
  if (status s = f.topology->service().submit(std::move(r), sink); !s) return s;
  if (std::string e = sink->wait(); !e.empty())
    return error(errc::internal, f.name + " request failed: " + e);
  if (!timed) return ok_status();
  const auto seconds = [](clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const int n = static_cast<int>(sink->tokens().size());
  ++f.requests;
  f.tokens += n;
  f.decoded += std::max(0, n - 1);
  f.seconds += seconds(sent, sink->ended());
  f.first_token_seconds += seconds(sent, sink->first_token());
  const double decode = seconds(sink->first_token(), sink->last_token());
  f.decode_seconds += decode;
  f.decode_rates.push_back(decode > 0 ? (n - 1) / decode : 0.0);
  f.answers.push_back(sink->tokens());
  return ok_status();
}

// The decode workers' speculation counts, summed over the roles' statuses.
json speculation_of(deploy::topology& topology) {
  int64_t steps = 0, drafted = 0, accepted = 0, gated = 0;
  for (const auto& role : json::parse(topology.service().status_json())) {
    if (!role.contains("detail") || !role["detail"].contains("speculation")) continue;
    const json& s = role["detail"]["speculation"];
    steps += s.value("verify_steps", int64_t{0});
    drafted += s.value("drafted_tokens", int64_t{0});
    accepted += s.value("accepted_tokens", int64_t{0});
    gated += s.value("gated_steps", int64_t{0});
  }
  return {{"verify_steps", steps},
          {"drafted_tokens", drafted},
          {"accepted_tokens", accepted},
          {"gated_steps", gated}};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

result<std::string> run_served_rows(const served_options& o, json& out) {
  std::vector<mode_figures> modes(2);
  modes[0].name = "plain";
  modes[1].name = "draft_head";
  for (size_t k = 0; k < modes.size(); ++k) {
    auto started = start(o, k == 1);
    if (!started) return started.err();
    modes[k].topology = std::move(started.value());
  }
  // A first request each, untimed: lazily built state, first-touched memory. Its prompt is none
  // of the timed ones, so no timed prompt finds its prefix cached by it.
  if (!o.prompts.empty()) {
    std::vector<int32_t> warm(o.prompts[0].rbegin(), o.prompts[0].rend());
    for (auto& m : modes) {
      if (status s = ask(m, warm, o.max_tokens, false); !s) return s.err();
    }
  }
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t i = 0; i < o.prompts.size(); ++i) {
      const bool plain_first = (static_cast<size_t>(r) + i) % 2 == 0;
      for (size_t k : {plain_first ? size_t{0} : size_t{1}, plain_first ? size_t{1} : size_t{0}}) {
        if (status s = ask(modes[k], o.prompts[i], o.max_tokens, true); !s) return s.err();
      }
    }
  }
  const mode_figures& plain = modes[0];
  std::vector<double> ratios;
  for (size_t i = 0; i < plain.decode_rates.size(); ++i) {
    if (plain.decode_rates[i] > 0)
      ratios.push_back(modes[1].decode_rates[i] / plain.decode_rates[i]);
  }
  const bool same = modes[1].answers == plain.answers;
  table t({"mode", "requests", "tokens/s after the first", "speedup", "end to end tokens/s",
           "end to end speedup", "first token ms", "acceptance", "same tokens"});
  out["served"] = {{"rows", json::array()}};
  for (size_t k = 0; k < modes.size(); ++k) {
    const mode_figures& m = modes[k];
    const double decode_rate = m.decode_seconds > 0 ? m.decoded / m.decode_seconds : 0.0;
    const double end_to_end = m.seconds > 0 ? m.tokens / m.seconds : 0.0;
    const double plain_end_to_end = plain.seconds > 0 ? plain.tokens / plain.seconds : 0.0;
    const double speedup = k == 0 ? 1.0 : median(ratios);
    const double end_to_end_speedup = plain_end_to_end > 0 ? end_to_end / plain_end_to_end : 0.0;
    const double first_token_ms = m.requests > 0 ? 1e3 * m.first_token_seconds / m.requests : 0.0;
    const json spec = speculation_of(*m.topology);
    const int64_t drafted = spec["drafted_tokens"].get<int64_t>();
    const double acceptance =
        drafted > 0 ? static_cast<double>(spec["accepted_tokens"].get<int64_t>()) / drafted : 0.0;
    out["served"]["rows"].push_back({{"mode", m.name},
                                     {"requests", m.requests},
                                     {"tokens_per_s", decode_rate},
                                     {"speedup", speedup},
                                     {"end_to_end_tokens_per_s", end_to_end},
                                     {"end_to_end_speedup", end_to_end_speedup},
                                     {"first_token_ms", first_token_ms},
                                     {"speculation", spec},
                                     {"same_tokens", k == 0 || same}});
    t.add_row({m.name, std::to_string(m.requests), fixed(decode_rate, 1), fixed(speedup, 2) + "x",
               fixed(end_to_end, 1), fixed(end_to_end_speedup, 2) + "x", fixed(first_token_ms, 2),
               k == 0 ? "-" : fixed(100.0 * acceptance, 1) + "%", k == 0 || same ? "yes" : "NO"});
  }
  return "single-user requests through the actor topology of the embedded manifest, as brigade "
         "serve runs it\n(plainly, and with --draft-model: its head and the measured gate; "
         "speedup: the median of\nper-request ratios, each prompt taken by both in turn)\n\n" +
         t.render();
}

}  // namespace brigade::bench

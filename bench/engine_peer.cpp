#include "bench/engine_peer.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/peers/llamacpp/llama_peer.hpp"
#include "bench/peers/llamacpp/qwen3moe_gguf.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "model/engine.hpp"

namespace brigade::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using llamacpp::llama_peer;

constexpr int prefill_tokens = 512;
constexpr int prefill_trials = 3;  // best of, on both sides, as plain `bench engine` takes
constexpr int check_prompt_tokens = 16;
constexpr int check_tokens = 32;

struct phase {
  std::string key;   ///< JSON name
  std::string name;  ///< table row
  int batch = 0;     ///< 0: prefill
};

const std::vector<phase>& phases() {
  static const std::vector<phase> list{
      {"prefill_512", "prefill, 512-token prompt (tokens/s)", 0},
      {"decode_batch_1", "decode batch 1 (tokens/s)", 1},
      {"decode_batch_8", "decode batch 8 (tokens/s)", 8},
  };
  return list;
}

// How far llama.cpp's greedy tokens follow brigade's.
struct agreement {
  int same = 0;  ///< leading tokens equal
  int of = 0;
  double brigade_top2_gap = 0;  ///< brigade's top-2 logit gap where they part (0: they do not)
};

// One side of the comparison and its samples[phase][round].
struct side {
  std::string label;
  std::string variant;  // llama.cpp's CPU variant; empty for brigade
  std::function<result<double>(const phase&)> measure;
  std::vector<std::vector<double>> samples;
  agreement check;
};

struct spread {
  double median = 0, min = 0, max = 0;
};

spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v.front(), v.back()};
}

json spread_json(const spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

std::vector<int32_t> check_prompt(int vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < check_prompt_tokens; ++i)
    ids.push_back(static_cast<int32_t>((3 * 7919 + static_cast<int64_t>(i) * 104729) % vocab));
  return ids;
}

// The GGUF beside the checkpoint, converted again whenever the checkpoint is newer.
result<std::string> converted_model(const std::string& model_dir) {
  const std::string gguf = model_dir + ".gguf";
  std::error_code ec;
  const auto source_time = fs::last_write_time(model_dir + "/model.safetensors", ec);
  if (!ec && fs::exists(gguf) && fs::last_write_time(gguf, ec) >= source_time) return gguf;
  std::fprintf(stderr, "converting %s to GGUF ...\n", model_dir.c_str());
  const std::string partial = gguf + ".partial";
  auto written = llamacpp::write_qwen3moe_gguf(model_dir, partial);
  if (!written) return written.err();
  fs::rename(partial, gguf, ec);
  if (ec) return error(errc::io_error, gguf + ": " + ec.message());
  return gguf;
}

// Brigade's greedy tokens and the logits each came from.
struct greedy_run {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [tokens][vocab]
};

greedy_run brigade_greedy(const model::loaded_model& m, gpu::backend& dev,
                          const std::vector<int32_t>& prompt) {
  model::engine_options eo;
  eo.kv_tokens = static_cast<int>(prompt.size()) + check_tokens + 16;
  model::engine eng(m, dev, eo);
  model::request_options req;
  req.max_tokens = check_tokens;
  req.keep_logits = true;
  const int64_t id = eng.submit(prompt, req).value();
  std::vector<model::token_event> events;
  while (eng.step(events)) {
  }
  return {eng.output(id), eng.kept_logits(id)};
}

agreement compare_tokens(const greedy_run& ours, const std::vector<int32_t>& theirs, int vocab) {
  agreement a;
  a.of = static_cast<int>(ours.tokens.size());
  while (a.same < a.of && a.same < static_cast<int>(theirs.size()) &&
         ours.tokens[static_cast<size_t>(a.same)] == theirs[static_cast<size_t>(a.same)]) {
    ++a.same;
  }
  if (a.same < a.of) {
    std::vector<float> row(ours.logits.begin() + static_cast<ptrdiff_t>(a.same) * vocab,
                           ours.logits.begin() + static_cast<ptrdiff_t>(a.same + 1) * vocab);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    a.brigade_top2_gap = row[0] - row[1];
  }
  return a;
}

status measure_rounds(std::vector<side>& sides, int rounds) {
  for (side& s : sides)
    s.samples.assign(phases().size(), {});
  for (int round = 0; round < rounds; ++round) {
    std::fprintf(stderr, "round %d of %d ...\n", round + 1, rounds);
    for (size_t i = 0; i < sides.size(); ++i) {
      side& s = sides[round % 2 ? sides.size() - 1 - i : i];
      for (size_t ph = 0; ph < phases().size(); ++ph) {
        auto v = s.measure(phases()[ph]);
        if (!v) return v.err();
        s.samples[ph].push_back(v.value());
      }
    }
  }
  return ok_status();
}

// brigade's ratio to `peer` in each round of phase `ph`.
std::vector<double> ratios(const side& brigade, const side& peer, size_t ph) {
  std::vector<double> r;
  for (size_t k = 0; k < brigade.samples[ph].size(); ++k)
    r.push_back(brigade.samples[ph][k] / peer.samples[ph][k]);
  return r;
}

std::string cell(const spread& s, int decimals) {
  return fixed(s.median, decimals) + " (" + fixed(s.min, decimals) + "-" + fixed(s.max, decimals) +
         ")";
}

void print_table(const std::vector<side>& sides) {
  std::vector<std::string> headers{"phase"};
  for (const side& s : sides)
    headers.push_back(s.label);
  for (size_t p = 1; p < sides.size(); ++p)
    headers.push_back("brigade / " + sides[p].label);
  table t(headers);
  for (size_t ph = 0; ph < phases().size(); ++ph) {
    std::vector<std::string> row{phases()[ph].name};
    for (const side& s : sides)
      row.push_back(cell(spread_of(s.samples[ph]), 0));
    for (size_t p = 1; p < sides.size(); ++p)
      row.push_back(cell(spread_of(ratios(sides[0], sides[p], ph)), 2));
    t.add_row(row);
  }
  std::printf("%s\n", t.render().c_str());
}

json side_json(const side& s, const side& brigade) {
  json j = {{"label", s.label}};
  for (size_t ph = 0; ph < phases().size(); ++ph) {
    json p = spread_json(spread_of(s.samples[ph]));
    p["samples"] = s.samples[ph];
    j["phases"][phases()[ph].key] = p;
    if (&s != &brigade) {
      j["brigade_over_peer"][phases()[ph].key] = spread_json(spread_of(ratios(brigade, s, ph)));
    }
  }
  if (&s != &brigade) {
    j["variant"] = s.variant;
    j["greedy_check"] = {{"same_tokens", s.check.same},
                         {"of", s.check.of},
                         {"brigade_top2_gap_where_they_part", s.check.brigade_top2_gap}};
  }
  return j;
}

// The llama.cpp drivers: the variant llama.cpp picks for this CPU, and the AVX2 build beside
// it when that is another one.
result<std::vector<llama_peer>> start_peers(const llamacpp::toolchain& tc, const std::string& gguf,
                                            int threads) {
  std::vector<llama_peer> peers;
  auto best = llama_peer::start(tc, gguf, "", threads);
  if (!best) return best.err();
  peers.push_back(std::move(best.value()));
  if (!tc.avx2_cpu_lib.empty() && peers[0].variant() != "haswell") {
    auto avx2 = llama_peer::start(tc, gguf, tc.avx2_cpu_lib, threads);
    if (!avx2) return avx2.err();
    peers.push_back(std::move(avx2.value()));
  }
  return peers;
}

// Fails when a variant's first greedy token differs from brigade's: the conversion or the peer
// computes another model. Later partings are reported, not failed: with bf16 activations,
// llama.cpp may turn the other way at a near-tie.
status check_greedy(const model::loaded_model& m, gpu::backend& dev, std::vector<side>& sides,
                    std::vector<llama_peer>& peers) {
  const int vocab = m.config.vocab_size;
  const std::vector<int32_t> prompt = check_prompt(vocab);
  const greedy_run ours = brigade_greedy(m, dev, prompt);
  for (size_t p = 0; p < peers.size(); ++p) {
    auto theirs = peers[p].greedy(prompt, check_tokens);
    if (!theirs) return theirs.err();
    side& s = sides[p + 1];
    s.check = compare_tokens(ours, theirs.value(), vocab);
    if (s.check.same == 0) {
      return error(errc::internal,
                   s.label + "'s first greedy token is " +
                       (theirs->empty() ? std::string("missing") : std::to_string(theirs->at(0))) +
                       ", brigade's " + std::to_string(ours.tokens.at(0)) +
                       ": the two do not run the same model, so the timings would mean nothing");
    }
  }
  return ok_status();
}

void print_report(const peer_options& opt, const model::loaded_model& m,
                  const llamacpp::toolchain& tc, const std::vector<side>& sides, int threads,
                  gpu::cpu::kernel_path path) {
  std::printf(
      "brigade beside llama.cpp: shape %s (%.0fM parameters, %.1fM active, %d experts "
      "top-%d, hidden %d, bf16), %d threads each, rounds: %d, decode steps: %d\n",
      opt.shape.c_str(), m.config.total_params() / 1e6, m.config.active_params() / 1e6,
      m.config.num_experts, m.config.top_k, m.config.hidden_size, threads, opt.rounds,
      opt.decode_steps);
  std::printf("brigade: CPU kernel path %s; llama.cpp release %s (@node-llama-cpp/linux-x64 %s)\n",
              gpu::cpu::kernel_path_name(path), tc.llama_release.c_str(),
              tc.package_version.c_str());
  std::printf("greedy check, %d tokens after a %d-token prompt:", check_tokens,
              check_prompt_tokens);
  for (size_t p = 1; p < sides.size(); ++p) {
    const agreement& a = sides[p].check;
    std::printf("%s %s %d/%d", p > 1 ? ";" : "", sides[p].label.c_str(), a.same, a.of);
    if (a.same < a.of) std::printf(" (brigade's top-2 gap there: %.4f)", a.brigade_top2_gap);
  }
  std::printf("\nmedian (min-max) of the rounds; ratio: median of the per-round ratios\n\n");
  print_table(sides);
}

json report_json(const peer_options& opt, const model::loaded_model& m,
                 const llamacpp::toolchain& tc, const std::string& gguf,
                 const std::vector<side>& sides, int threads, gpu::cpu::kernel_path path) {
  json j = {{"shape", opt.shape},
            {"model",
             {{"params", m.config.total_params()},
              {"active_params", m.config.active_params()},
              {"experts", m.config.num_experts},
              {"top_k", m.config.top_k},
              {"hidden", m.config.hidden_size},
              {"dtype", "bfloat16"}}},
            {"threads", threads},
            {"kernel_path", gpu::cpu::kernel_path_name(path)},
            {"rounds", opt.rounds},
            {"decode_steps", opt.decode_steps},
            {"brigade", side_json(sides[0], sides[0])}};
  j["peer"] = {{"name", opt.peer},
               {"llama_cpp_release", tc.llama_release},
               {"package", "@node-llama-cpp/linux-x64 " + tc.package_version},
               {"gguf", gguf},
               {"greedy_check_prompt_tokens", check_prompt_tokens}};
  for (size_t p = 1; p < sides.size(); ++p)
    j["peer"]["variants"].push_back(side_json(sides[p], sides[0]));
  return j;
}

}  // namespace

int compare_with_peer(const peer_options& opt, thread_pool& pool) {
  auto fail = [](const error& e) { return std::fprintf(stderr, "%s\n", e.message.c_str()), 1; };
  if (opt.peer != "llamacpp") return fail(error(errc::invalid_argument, "--peer: only llamacpp"));
  auto spec = engine_model_spec(opt.shape);
  if (!spec) return fail(spec.err());
  auto tc = llamacpp::prepare_toolchain(
      opt.toolchain_dir.empty() ? llamacpp::default_toolchain_dir() : opt.toolchain_dir);
  if (!tc) return fail(tc.err());
  const gpu::cpu::kernel_path path = opt.path;
  auto dev = gpu::cpu::make_backend(&pool, path);
  auto loaded = load_engine_model(opt.work_dir, *dev, opt.shape);
  if (!loaded) return fail(loaded.err());
  const model::loaded_model& m = *loaded.value();
  auto gguf = converted_model(engine_model_dir(opt.work_dir, opt.shape));
  if (!gguf) return fail(gguf.err());
  const int threads = static_cast<int>(pool.size());
  auto peers = start_peers(tc.value(), gguf.value(), threads);
  if (!peers) return fail(peers.err());

  std::vector<side> sides(1 + peers->size());
  sides[0].label = "brigade";
  sides[0].measure = [&](const phase& ph) -> result<double> {
    if (ph.batch == 0) return prefill_tokens_per_s(m, *dev, prefill_tokens, prefill_trials);
    return decode_tokens_per_s(m, *dev, ph.batch, opt.decode_steps);
  };
  for (size_t p = 0; p < peers->size(); ++p) {
    llama_peer& peer = peers.value()[p];
    side& s = sides[p + 1];
    s.label = "llama.cpp " + peer.variant();
    s.variant = peer.variant();
    s.measure = [&peer, &opt](const phase& ph) -> result<double> {
      if (ph.batch == 0) return peer.prefill_tokens_per_s(prefill_tokens, prefill_trials);
      return peer.decode_tokens_per_s(ph.batch, opt.decode_steps, decode_prompt_tokens);
    };
  }
  status s = check_greedy(m, *dev, sides, peers.value());
  if (s) s = measure_rounds(sides, opt.rounds);
  if (!s) return fail(s.err());
  if (opt.as_json) {
    std::printf(
        "%s\n",
        report_json(opt, m, tc.value(), gguf.value(), sides, threads, path).dump(2).c_str());
  } else {
    print_report(opt, m, tc.value(), sides, threads, path);
  }
  return 0;
}

}  // namespace brigade::bench

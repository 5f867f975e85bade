// `brigade bench speculation`: decode speed with prompt-lookup speculation beside plain decoding,
// in one run, on the engine benchmark model. Each round runs every configuration once, so the
// machine's drift falls on all of them; the ratios are each round's speculative tokens/s over the
// same round's plain tokens/s, and the figures are medians over rounds. Every speculative run's
// tokens are checked against the plain run's: the same prompts must give the same output.
//
// The model has random weights, so how often drafts are right says little about a trained model;
// what carries over is the cost side: what a step verifying several tokens costs beside a plain
// one, and what drafting costs when nothing is trusted. The trained pair in models/default, when
// there is one, then gets rows of its own (bench/speculation_pair.hpp).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/engine_model.hpp"
#include "bench/speculation_pair.hpp"
#include "bench/table.hpp"
#include "common/thread_pool.hpp"
#include "model/draft_model.hpp"
#include "model/engine.hpp"
#include "model/kv_layout.hpp"
#include "model/loaded_model.hpp"
#include "model/transformer.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

// Prompts like an agent's: a tool output resent after the model's reply ("repeating"), or
// prompts without repeats ("fresh"), where only the generation itself can be drafted from.
std::vector<std::vector<int32_t>> workload_prompts(const std::string& workload, int count,
                                                   int prompt_tokens, int vocab) {
  std::mt19937 rng(workload == "repeating" ? 11 : 12);
  std::uniform_int_distribution<int32_t> token(1, vocab - 1);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p;
    if (workload == "repeating") {
      std::vector<int32_t> tool_output(static_cast<size_t>(prompt_tokens / 3));
      for (int32_t& t : tool_output)
        t = token(rng);
      p = tool_output;
      while (static_cast<int>(p.size()) < prompt_tokens - static_cast<int>(tool_output.size()))
        p.push_back(token(rng));
      p.insert(p.end(), tool_output.begin(), tool_output.end());
    } else {
      for (int t = 0; t < prompt_tokens; ++t)
        p.push_back(token(rng));
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

struct run_figures {
  double tokens_per_s = 0;
  double tokens_per_sequence_step = 0;  // decode tokens over decode sequence-steps
  double acceptance = 0;                // accepted drafts over drafted
  std::vector<std::vector<int32_t>> outputs;
};

// Decodes `prompts` together; times the steps after every sequence has its first token.
run_figures run_once(const model::loaded_model& m, gpu::backend& dev,
                     const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
                     int max_draft, bool adaptive) {
  model::engine_options opt;
  opt.max_running = static_cast<int>(prompts.size());
  opt.max_step_tokens = 1024;
  opt.kv_tokens = static_cast<int>(prompts.size()) *
                  (static_cast<int>(prompts[0].size()) + max_tokens + 2 * opt.block_tokens);
  opt.speculation.max_draft = max_draft;
  opt.speculation.adaptive = adaptive;
  opt.speculation.measured_gate = false;  // the rows measure drafting itself
  model::engine eng(m, dev, opt);
  model::request_options req;
  req.max_tokens = max_tokens;
  const std::vector<int64_t> ids = start_all(eng, prompts, req);
  std::vector<model::token_event> events;
  const model::speculation_stats before = eng.speculation();
  int64_t tokens = 0;
  const auto start = clock_type::now();
  while (eng.step(events)) {
    tokens += static_cast<int64_t>(events.size());
    events.clear();
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  const model::speculation_stats& after = eng.speculation();
  const int64_t verify_steps = after.verify_steps - before.verify_steps;
  const int64_t verify_tokens = after.emitted_tokens - before.emitted_tokens;
  const int64_t drafted = after.drafted_tokens - before.drafted_tokens;
  const int64_t accepted = after.accepted_tokens - before.accepted_tokens;
  run_figures r;
  r.tokens_per_s = static_cast<double>(tokens) / seconds;
  // Tokens the verify steps emitted past a finish are not counted in `tokens`; the plain
  // sequence-steps are at least zero.
  const int64_t plain_steps = std::max<int64_t>(0, tokens - verify_tokens);
  r.tokens_per_sequence_step = static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(
                                                                 1, verify_steps + plain_steps));
  r.acceptance = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  for (int64_t id : ids)
    r.outputs.push_back(eng.output(id));
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct config_figures {
  std::string workload;
  int batch = 0;
  int max_draft = 0;
  bool adaptive = true;
  std::vector<double> tokens_per_s, ratios;
  double tokens_per_sequence_step = 0, acceptance = 0;
  bool same_tokens = true;
};

// Only the trained pair: its rows, or its fitting events.
int run_pair_section(const pair_options& pair, gpu::backend& dev, bool as_json) {
  json j;
  std::string text;
  if (status s = run_pair_bench(pair, dev, j, text); !s)
    return std::fprintf(stderr, "%s\n", s.err().message.c_str()), 1;
  if (as_json || !pair.record_events.empty())
    std::printf("%s\n", j.dump(2).c_str());
  else
    std::printf("trained pair %s\n\n%s", pair.dir.c_str(), text.c_str());
  return 0;
}

// One forward step's inputs kept ready: `batch` sequences, `context` tokens long, each feeding
// 1 + drafts tokens with a logits row for each.
class step_fixture {
 public:
  step_fixture(const model::loaded_model& m, gpu::backend& dev, int batch, int context, int drafts,
               int attention_window = 0)
      : m_(m),
        config_(model::draft_model::windowed(m.config, attention_window)),
        forward_(config_, m.forward->device(), m.forward->weights()),
        ws_(m.config, dev, batch * (drafts + 1)),
        context_(context),
        drafts_(drafts) {
    const model::model_config& c = m.config;
    const int block_tokens = 16;
    const int blocks_per_seq = (context + drafts + 1 + block_tokens - 1) / block_tokens;
    kv_ = dev.make_kv(model::kv_layout_for(c, batch * blocks_per_seq, block_tokens));
    std::mt19937 rng(static_cast<uint32_t>(batch * 100 + drafts));
    std::uniform_int_distribution<int32_t> token(1, c.vocab_size - 1);
    fed_.resize(static_cast<size_t>(batch));
    blocks_.resize(static_cast<size_t>(batch));
    for (int s = 0; s < batch; ++s) {
      for (int t = 0; t <= drafts; ++t)
        fed_[static_cast<size_t>(s)].push_back(token(rng));
      for (int k = 0; k < blocks_per_seq; ++k)
        blocks_[static_cast<size_t>(s)].push_back(s * blocks_per_seq + k);
    }
    build();
  }

  /// Feeds `text`'s tokens from `offset` on (wrapping) in place of the random ones: the step then
  /// routes as text does, and a new offset routes it anew, as each step of a decode loop does.
  void feed_text(const std::vector<int32_t>& text, size_t offset) {
    for (auto& tokens : fed_) {
      for (auto& t : tokens)
        t = text[offset++ % text.size()];
    }
    build();
  }

  /// Runs the step once; returns its seconds.
  double run() {
    const auto start = clock_type::now();
    model::run_step(forward_, *m_.experts, *kv_, ws_, batch_, logits_);
    return std::chrono::duration<double>(clock_type::now() - start).count();
  }

 private:
  void build() {
    batch_.clear();
    for (size_t s = 0; s < fed_.size(); ++s) {
      batch_.add_sequence(fed_[s].data(), drafts_ + 1, context_, blocks_[s].data(),
                          static_cast<int>(blocks_[s].size()), drafts_ + 1);
    }
  }

  const model::loaded_model& m_;
  model::model_config config_;  // m's, with the attention window
  model::transformer forward_;  // m's layers under config_
  std::unique_ptr<gpu::kv_storage> kv_;
  model::workspace ws_;
  int context_, drafts_;
  std::vector<std::vector<int32_t>> fed_, blocks_;
  model::step_batch batch_;
  std::vector<float> logits_;
};

}  // namespace

double verify_step_seconds(const model::loaded_model& m, gpu::backend& dev, int batch, int context,
                           int drafts, int reps, const std::vector<int32_t>* text,
                           int attention_window) {
  step_fixture step(m, dev, batch, context, drafts, attention_window);
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    // A window 61 tokens on from the last one's: other tokens, other experts.
    if (text != nullptr && !text->empty()) step.feed_text(*text, static_cast<size_t>(r) * 61);
    const double t = step.run();
    if (r > 0) times.push_back(t);
  }
  return median(times);
}

draft_forward_seconds draft_forwards_after_target(const model::loaded_model& target,
                                                  const model::loaded_model& draft,
                                                  gpu::backend& dev, int context, int drafts,
                                                  int reps, int draft_attention_window) {
  step_fixture verify(target, dev, 1, context, drafts);
  step_fixture forward(draft, dev, 1, context, 0, draft_attention_window);
  std::vector<double> first, next;
  for (int r = 0; r <= reps; ++r) {
    verify.run();
    const double cold = forward.run();
    double rest = 0;
    for (int d = 1; d < drafts; ++d)
      rest += forward.run();
    if (r == 0) continue;
    first.push_back(cold);
    if (drafts > 1) next.push_back(rest / (drafts - 1));
  }
  return {median(first), next.empty() ? median(first) : median(next)};
}

int speculation(int argc, char** argv) {
  bool as_json = false, quick = false;
  int rounds = 3, max_tokens = 64, prompt_tokens = 192;
  std::vector<int> drafts{2, 5, 8};
  std::vector<int> batches{1, 8};
  std::string work_dir = (std::filesystem::temp_directory_path() / "brigade-bench").string();
  pair_options pair;
  pair.dir = "models/default";
  bool pair_only = false;
  CLI::App app{"Decode speed with prompt-lookup speculation beside plain decoding",
               "brigade bench speculation"};
  app.option_defaults()->always_capture_default();
  app.add_flag("--json", as_json, "print one JSON object");
  app.add_flag("--quick", quick, "one round of 16 tokens (for smoke tests)");
  app.add_option("--rounds", rounds, "rounds of every configuration")->check(CLI::Range(1, 100));
  app.add_option("--max-tokens", max_tokens, "tokens generated per sequence")
      ->check(CLI::Range(2, 4096));
  app.add_option("--prompt-tokens", prompt_tokens, "tokens per prompt")->check(CLI::Range(8, 8192));
  app.add_option("--drafts", drafts, "max_draft values beside plain decoding")
      ->check(CLI::Range(1, 64));
  app.add_option("--batches", batches, "sequences decoding together")->check(CLI::Range(1, 256));
  app.add_option("--work-dir", work_dir, "where the generated benchmark model is kept");
  app.add_option("--pair", pair.dir,
                 "a trained pair's directory (target/, draft/, heldout.txt); none skips it");
  app.add_option("--draft-attention-window", pair.draft_attention_window,
                 "positions the pair's draft attends to, the most recent (0: all)")
      ->check(CLI::Range(0, 1 << 24))
      ->default_str("the draft directory's draft_settings.json, else 0");
  app.add_option("--confidence-head", pair.head_path,
                 "the draft's confidence head JSON, or none (default: the draft directory's)");
  app.add_option("--record-events", pair.record_events,
                 "record the draft's verify steps on the fitting prompts to this JSON-lines file "
                 "(for scripts/fit_confidence_head.py) and stop");
  app.add_option("--tune-head", pair.tune_head,
                 "pick the confidence head's thresholds for each of --sweep-batches by decoding "
                 "the fitting prompts with each, write the head to this file and stop");
  app.add_option("--concurrency", pair.concurrency, "sequences decoding together, pair rows")
      ->check(CLI::Range(1, 256));
  app.add_option("--pair-prompt-tokens", pair.prompt_tokens,
                 "tokens of each of the pair's prompts (agents resend long contexts)")
      ->check(CLI::Range(8, 8192));
  app.add_option("--pair-max-tokens", pair.max_tokens, "tokens the pair generates per prompt")
      ->check(CLI::Range(2, 4096));
  app.add_option("--pair-prompts", pair.prompts, "single-stream prompts of the pair")
      ->check(CLI::Range(1, 1000));
  app.add_option("--pair-rounds", pair.rounds, "passes over the pair's prompts")
      ->check(CLI::Range(1, 100));
  app.add_flag("--pair-only", pair_only, "only the trained pair, not the engine benchmark model");
  app.add_option("--gate", pair.gate,
                 "disable_above_batch of the gated pair rows (-1: brigade serve's default)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_option("--sweep-batches", pair.sweep_batches,
                 "batches of the pair's plain against draft-model sweep (--quick: 1 2)")
      ->check(CLI::Range(1, 256));
  bool no_sweep = false;
  app.add_flag("--no-sweep", no_sweep, "skip the pair's batch sweep");
  bool no_served = false;
  app.add_flag("--no-served", no_served,
               "skip the pair's single-user requests through the actor topology (brigade serve)");
  CLI11_PARSE(app, argc, argv);
  pair.served = !no_served;
  if (quick) rounds = 1, max_tokens = 16, pair.prompts = 2, pair.max_tokens = 16;
  if (quick && app.count("--sweep-batches") == 0) pair.sweep_batches = {1, 2};
  if (no_sweep) pair.sweep_batches.clear();
  // The default pair is optional: a checkout run elsewhere than its root skips it.
  const bool pair_asked = app.count("--pair") > 0;
  const bool run_pair =
      pair.dir != "none" && (pair_asked || std::filesystem::exists(pair.dir + "/target"));
  if (!pair.record_events.empty() || !pair.tune_head.empty() || pair_only) {
    if (!run_pair) return std::fprintf(stderr, "no trained pair: set --pair DIR\n"), 1;
    auto dev = gpu::make_cpu_backend(&thread_pool::shared());
    return run_pair_section(pair, *dev, as_json);
  }

  thread_pool& pool = thread_pool::shared();
  auto dev = gpu::make_cpu_backend(&pool);
  auto loaded = load_engine_model(work_dir, *dev);
  if (!loaded) return std::fprintf(stderr, "%s\n", loaded.err().message.c_str()), 1;
  const model::loaded_model& m = *loaded.value();

  std::vector<config_figures> configs;
  for (const std::string workload : {"repeating", "fresh", "resent"}) {
    for (int batch : batches) {
      for (int d : drafts)
        for (bool adaptive : {true, false})
          configs.push_back({workload, batch, d, adaptive, {}, {}, 0, 0, true});
    }
  }
  // A group: every variant of one workload and batch, between two plain runs.
  const size_t per_group = 2 * drafts.size();
  const int runs = rounds * static_cast<int>(configs.size() + 2 * configs.size() / per_group);
  int done = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t group = 0; group < configs.size(); group += per_group) {
      const config_figures& head = configs[group];
      auto prompts = workload_prompts(head.workload == "resent" ? "fresh" : head.workload,
                                      head.batch, prompt_tokens, m.config.vocab_size);
      if (head.workload == "resent") {
        // The agent's next call: the question, the model's answer, and the question again.
        const run_figures first = run_once(m, *dev, prompts, max_tokens, 0, true);
        for (size_t i = 0; i < prompts.size(); ++i) {
          std::vector<int32_t> again = prompts[i];
          again.insert(again.end(), first.outputs[i].begin(), first.outputs[i].end());
          again.insert(again.end(), prompts[i].begin(), prompts[i].end());
          prompts[i] = again;
        }
      }
      std::fprintf(stderr, "\rround %d/%d: %s, batch %d ... (%d/%d runs)", round + 1, rounds,
                   head.workload.c_str(), head.batch, done, runs);
      // Plain decoding before and after the speculative runs, so that drift within the group
      // falls on both sides of the ratio.
      const run_figures plain = run_once(m, *dev, prompts, max_tokens, 0, true);
      std::vector<run_figures> speculative;
      for (size_t k = 0; k < per_group; ++k)
        speculative.push_back(run_once(m, *dev, prompts, max_tokens, configs[group + k].max_draft,
                                       configs[group + k].adaptive));
      const run_figures plain_after = run_once(m, *dev, prompts, max_tokens, 0, true);
      done += static_cast<int>(per_group) + 2;
      const double plain_tokens_per_s = 0.5 * (plain.tokens_per_s + plain_after.tokens_per_s);
      for (size_t k = 0; k < per_group; ++k) {
        config_figures& c = configs[group + k];
        const run_figures& r = speculative[k];
        c.tokens_per_s.push_back(r.tokens_per_s);
        c.ratios.push_back(r.tokens_per_s / plain_tokens_per_s);
        c.tokens_per_sequence_step = r.tokens_per_sequence_step;
        c.acceptance = r.acceptance;
        c.same_tokens = c.same_tokens && r.outputs == plain.outputs;
      }
    }
  }
  std::fprintf(stderr, "\r%-70s\r", "");

  // What a verify step costs beside a plain one, alternating the draft counts round by round.
  std::vector<int> fed_drafts{0};
  fed_drafts.insert(fed_drafts.end(), drafts.begin(), drafts.end());
  std::map<std::pair<int, int>, std::vector<double>> step_s;  // (batch, drafts) -> seconds
  const int cost_rounds = quick ? 1 : 5, cost_reps = quick ? 2 : 6;
  for (int round = 0; round < cost_rounds; ++round) {
    std::fprintf(stderr, "\rverify steps: round %d/%d ...", round + 1, cost_rounds);
    for (int batch : batches) {
      for (int d : fed_drafts)
        step_s[{batch, d}].push_back(
            verify_step_seconds(m, *dev, batch, prompt_tokens, d, cost_reps));
    }
  }
  std::fprintf(stderr, "\r%-70s\r", "");

  bool all_same = true;
  json j;
  j["rounds"] = rounds;
  j["max_tokens"] = max_tokens;
  j["prompt_tokens"] = prompt_tokens;
  j["threads"] = pool.size();
  table t({"workload", "batch", "max draft", "window", "tokens/step", "drafts accepted", "tokens/s",
           "speed over plain", "same tokens"});
  for (const auto& c : configs) {
    all_same = all_same && c.same_tokens;
    const double tps = median(c.tokens_per_s), ratio = median(c.ratios);
    j["runs"].push_back({{"workload", c.workload},
                         {"batch", c.batch},
                         {"max_draft", c.max_draft},
                         {"adaptive", c.adaptive},
                         {"tokens_per_sequence_step", c.tokens_per_sequence_step},
                         {"acceptance", c.acceptance},
                         {"tokens_per_s", tps},
                         {"speed_over_plain", ratio},
                         {"same_tokens", c.same_tokens}});
    t.add_row({c.workload, std::to_string(c.batch), std::to_string(c.max_draft),
               c.adaptive ? "adaptive" : "fixed", fixed(c.tokens_per_sequence_step, 2),
               fixed(100.0 * c.acceptance, 0) + "%", fixed(tps, 1), fixed(ratio, 2) + "x",
               c.same_tokens ? "yes" : "NO"});
  }
  j["same_tokens"] = all_same;
  table cost({"batch", "max draft", "verify step ms", "over a plain step",
              "speed at 70% right drafts", "speed at 3.2 tokens/step"});
  for (int batch : batches) {
    const double plain_s = median(step_s[{batch, 0}]);
    for (int d : drafts) {
      const double verify_s = median(step_s[{batch, d}]);
      const double over = verify_s / plain_s;
      // Tokens a step yields when each draft is right with probability 0.7 given the ones
      // before it were: 1 + 0.7 + 0.7^2 + ... + 0.7^d.
      double expected = 0, p = 1;
      for (int i = 0; i <= d; ++i, p *= 0.7)
        expected += p;
      const bool reaches = d + 1 >= 3.2;
      j["verify_steps"].push_back(
          {{"batch", batch},
           {"max_draft", d},
           {"verify_step_ms", 1e3 * verify_s},
           {"plain_step_ms", 1e3 * plain_s},
           {"over_plain_step", over},
           {"speed_at_70_percent", expected / over},
           {"speed_at_3_2_tokens_per_step", reaches ? json(3.2 / over) : json(nullptr)}});
      cost.add_row({std::to_string(batch), std::to_string(d), fixed(1e3 * verify_s, 2),
                    fixed(over, 2) + "x", fixed(expected / over, 2) + "x",
                    reaches ? fixed(3.2 / over, 2) + "x" : "-"});
    }
  }
  if (run_pair) {
    std::string text;
    if (status s = run_pair_bench(pair, *dev, j["pair"], text); !s)
      return std::fprintf(stderr, "%s\n", s.err().message.c_str()), 1;
    j["rows"] = j["pair"]["rows"];
    if (!as_json) std::printf("trained pair %s\n\n%s\n", pair.dir.c_str(), text.c_str());
  }
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "speculative decoding beside plain decoding (%d rounds, %d-token prompts, %d "
        "tokens each, greedy, %d threads; ratios are medians of each round's runs)\n\n%s",
        rounds, prompt_tokens, max_tokens, pool.size(), t.render().c_str());
    std::printf(
        "\nwhat a verify step costs (each sequence feeds its last token and its drafts "
        "at position %d; medians of %d rounds), and the speed it gives when drafts are "
        "right, as projections\n\n%s",
        prompt_tokens, cost_rounds, cost.render().c_str());
  }
  if (!all_same) {
    std::fprintf(stderr, "speculative decoding changed the output: a bug, please report it\n");
    return 1;
  }
  return 0;
}

}  // namespace brigade::bench

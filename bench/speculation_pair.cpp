#include "bench/speculation_pair.hpp"
#include "bench/speculation_bounds.hpp"
#include "bench/speculation_served.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "bench/monotone_choice.hpp"
#include "bench/table.hpp"
#include "config/manifest.hpp"
#include "model/confidence_head.hpp"
#include "model/draft_model.hpp"
#include "model/engine.hpp"
#include "model/speculation_gate.hpp"
#include "model/tokenizer.hpp"

namespace brigade::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

// The configurations of a row: where drafts come from and how many a step verifies.
enum class source { plain, lookup, draft_fixed, draft_adaptive, draft_head };

const char* to_string(source s) {
  switch (s) {
    case source::plain:
      return "plain";
    case source::lookup:
      return "lookup";
    case source::draft_fixed:
      return "draft_fixed";
    case source::draft_adaptive:
      return "draft_adaptive";
    case source::draft_head:
      return "draft_head";
  }
  return "?";
}

struct pair_models {
  std::unique_ptr<model::loaded_model> target;
  std::shared_ptr<const model::loaded_model> draft;
  std::shared_ptr<const model::confidence_head> head;  // null when there is none
  int draft_window = 0;                                // pair_options::draft_attention_window
  std::vector<int32_t> fit_tokens, eval_tokens;        // the held-out text's two halves
};

// One verify step of a sequence with a draft model: the features of what the target verified,
// and how many drafts it kept.
struct step_record {
  std::vector<model::draft_feature> features;
  int kept = 0;
};

// Sums over the runs of one row.
struct row_figures {
  source src = source::plain;
  int concurrency = 1;
  int gate = 0;  // disable_above_batch; 0 never stops drafting
  // With the measured gate (as served), whose state carries over the row's runs; null: off, every
  // step may draft (the rows that measure a source itself).
  std::shared_ptr<model::speculation_gate> measured;
  // A draft_head row's head when not the pair's (the candidates --tune-head measures).
  std::shared_ptr<const model::confidence_head> head;
  int64_t tokens = 0, steps = 0, verified = 0, computed = 0, accepted = 0;
  double seconds = 0;
  // Timed steps by the drafts they verified (0..max_draft), and the draft model's forwards in
  // them: what they cost is charged when the bounds are taken, at the costs measured over the
  // whole run (step_costs).
  std::vector<int64_t> steps_by_length;
  int64_t draft_forwards = 0, drafting_steps = 0;  // drafting: with a draft forward
  // Untimed above: from submitting a run's prompts to every one's first token (the prefill, and
  // a draft model's prefill beside it), summed over the runs.
  double first_token_seconds = 0;
  int64_t runs = 0;
  // Per draft index i: steps that fed it, steps that reached it (fed it, and kept every draft
  // before it) and steps that kept it.
  std::vector<int64_t> drafted_at, reached_at, accepted_at;
  std::vector<step_record> records;
  // Tokens per second of each timed run, in run order: every row decodes the same prompt groups
  // in the same rounds, so run i of two rows pairs up (run_rows).
  std::vector<double> run_rates;
  bool same_tokens = true;

  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
  // The timed steps' verify costs in plain steps, at `cost`'s verify cost per length.
  double cost_units(const bound_costs& cost) const {
    double units = 0;
    for (size_t l = 0; l < steps_by_length.size(); ++l)
      units += static_cast<double>(steps_by_length[l]) * cost.verify[l] / cost.verify[0];
    return units;
  }
  // Their draft model's forwards in plain steps.
  double draft_units(const bound_costs& cost) const {
    return cost.draft_units(draft_forwards, drafting_steps);
  }
  double first_token_ms() const {
    return runs > 0 ? 1e3 * first_token_seconds / static_cast<double>(runs) : 0;
  }
  double per_step(int64_t n) const {
    return steps > 0 ? static_cast<double>(n) / static_cast<double>(steps) : 0;
  }
  double acceptance() const {
    return verified > 0 ? static_cast<double>(accepted) / static_cast<double>(verified) : 0;
  }
  std::vector<double> acceptance_by_position() const {
    std::vector<double> a;
    for (size_t i = 0; i < drafted_at.size(); ++i)
      a.push_back(drafted_at[i] > 0
                      ? static_cast<double>(accepted_at[i]) / static_cast<double>(drafted_at[i])
                      : 0.0);
    return a;
  }
  // Per index, the share kept of the drafts reached there: a verify step of length l yields
  // 1 + a0 + a0 a1 + ... + a0...a(l-1) tokens.
  std::vector<double> conditional_acceptance() const {
    std::vector<double> a;
    for (size_t i = 0; i < reached_at.size(); ++i)
      a.push_back(reached_at[i] > 0
                      ? static_cast<double>(accepted_at[i]) / static_cast<double>(reached_at[i])
                      : 0.0);
    return a;
  }
};

row_figures make_row(source s, int concurrency, bool measured_gate = false) {
  row_figures r;
  r.src = s;
  r.concurrency = concurrency;
  if (measured_gate) r.measured = std::make_shared<model::speculation_gate>();
  return r;
}

std::string row_name(const row_figures& r) {
  return std::string(to_string(r.src)) + (r.measured ? " (gate)" : "");
}

// `count` windows of `length` tokens spread evenly over `tokens`.
std::vector<std::vector<int32_t>> windows(const std::vector<int32_t>& tokens, int count,
                                          int length) {
  std::vector<std::vector<int32_t>> out;
  const size_t span = tokens.size() > static_cast<size_t>(length) ? tokens.size() - length : 0;
  for (int i = 0; i < count; ++i) {
    const size_t at =
        count > 1 ? span * static_cast<size_t>(i) / static_cast<size_t>(count - 1) : 0;
    const size_t end = std::min(tokens.size(), at + static_cast<size_t>(length));
    out.emplace_back(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                     tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

result<pair_models> load_pair(const pair_options& o, gpu::backend& dev) {
  namespace fs = std::filesystem;
  const std::string target_dir = (fs::path(o.dir) / "target").string();
  const std::string draft_dir = (fs::path(o.dir) / "draft").string();
  pair_models p;
  auto target = model::loaded_model::load(target_dir, dev, true);
  if (!target) return target.err();
  p.target = std::move(target.value());
  auto draft = model::draft_model::load(draft_dir, p.target->config, target_dir, dev);
  if (!draft) return draft.err();
  p.draft = draft.value();
  model::speculation_options asked;
  asked.draft_attention_window = o.draft_attention_window;
  p.draft_window = model::draft_model::attention_window_for(asked, *p.draft);
  auto head = model::confidence_head::for_draft(draft_dir, o.head_path);
  if (!head) return head.err();
  p.head = head.value();
  auto tok = model::tokenizer::load(target_dir);
  if (!tok) return tok.err();
  std::ifstream in((fs::path(o.dir) / "heldout.txt").string());
  if (!in) return error(errc::not_found, "cannot read " + o.dir + "/heldout.txt");
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<int32_t> all = tok->encode(text.str());
  // The first half fits the head, the second evaluates it: no prompt is in both.
  const auto half = all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2);
  p.fit_tokens.assign(all.begin(), half);
  p.eval_tokens.assign(half, all.end());
  return p;
}

model::engine_options options_for(const pair_models& p, source s, int max_draft, int sequences,
                                  int kv_tokens) {
  model::engine_options o;
  o.max_running = sequences;
  o.max_step_tokens = std::max(256, sequences * (max_draft + 1));
  o.kv_tokens = kv_tokens;
  if (s == source::plain) return o;
  o.speculation.max_draft = max_draft;
  o.speculation.adaptive = s != source::draft_fixed;
  if (s == source::lookup) return o;
  o.speculation.draft = model::draft_kind::model;
  o.speculation.draft_attention_window = p.draft_window;
  o.draft_weights = p.draft;
  if (s == source::draft_head) o.confidence_head = p.head;
  return o;
}

// Decodes `prompts` together with the configuration of `row`, adds its figures to the row's
// sums, and returns the outputs. Times the steps after every sequence has its first token.
std::vector<std::vector<int32_t>> run_row(const pair_models& p, gpu::backend& dev,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const pair_options& o, row_figures& row) {
  const int n = static_cast<int>(prompts.size());
  const int kv = n * (o.prompt_tokens + o.max_tokens + o.max_draft + 32);
  model::engine_options opt = options_for(p, row.src, o.max_draft, n, kv);
  if (row.head) opt.confidence_head = row.head;
  opt.speculation.disable_above_batch = row.gate;
  opt.speculation.measured_gate = row.measured != nullptr;
  opt.gate = row.measured;
  bool timing = false;
  opt.on_verified = [&](const model::draft_proposal& proposal, int kept) {
    if (!timing) return;
    const int fed = static_cast<int>(proposal.tokens.size());
    ++row.steps;
    row.verified += fed;
    row.computed += std::max(proposal.computed, fed);
    row.accepted += kept;
    const size_t length = static_cast<size_t>(std::min(fed, o.max_draft));
    if (row.steps_by_length.size() <= length) row.steps_by_length.resize(length + 1, 0);
    row.steps_by_length[length] += 1;
    if (row.src != source::lookup && std::max(proposal.computed, fed) > 0) {
      row.draft_forwards += std::max(proposal.computed, fed);
      row.drafting_steps += 1;
    }
    if (row.drafted_at.size() < static_cast<size_t>(fed)) {
      row.drafted_at.resize(static_cast<size_t>(fed), 0);
      row.reached_at.resize(static_cast<size_t>(fed), 0);
      row.accepted_at.resize(static_cast<size_t>(fed), 0);
    }
    for (int i = 0; i < fed; ++i) {
      row.drafted_at[static_cast<size_t>(i)] += 1;
      if (i <= kept) row.reached_at[static_cast<size_t>(i)] += 1;
      if (i < kept) row.accepted_at[static_cast<size_t>(i)] += 1;
    }
    if (!proposal.features.empty()) row.records.push_back({proposal.features, kept});
  };
  model::engine eng(*p.target, dev, opt);
  model::request_options req;
  req.max_tokens = o.max_tokens;
  const auto submitted = clock_type::now();
  const std::vector<int64_t> ids = start_all(eng, prompts, req);
  row.first_token_seconds += std::chrono::duration<double>(clock_type::now() - submitted).count();
  ++row.runs;
  std::vector<model::token_event> events;
  timing = true;
  const auto start = clock_type::now();
  int64_t tokens = 0;
  while (eng.step(events)) {
    tokens += static_cast<int64_t>(events.size());
    events.clear();
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  row.tokens += tokens;
  row.seconds += seconds;
  if (seconds > 0) row.run_rates.push_back(static_cast<double>(tokens) / seconds);
  std::vector<std::vector<int32_t>> outputs;
  for (int64_t id : ids)
    outputs.push_back(eng.output(id));
  return outputs;
}

// Predicted beside observed acceptance, in ten buckets of the head's prediction, over the drafts
// whose outcome verification observed, counted as a decoder counts them
// (confidence_head::calibrate). Empty buckets are left out.
json calibration(const model::confidence_head& head, const std::vector<step_record>& records) {
  model::confidence_calibration c;
  for (const step_record& r : records)
    head.calibrate(r.features, r.kept, c);
  json out = json::array();
  for (int b = 0; b < model::confidence_calibration::buckets; ++b) {
    const auto i = static_cast<size_t>(b);
    if (c.drafts[i] == 0) continue;
    const double n = static_cast<double>(c.drafts[i]);
    out.push_back({{"bucket", model::confidence_calibration::bucket_name(b)},
                   {"drafts", c.drafts[i]},
                   {"predicted", c.predicted[i] / n},
                   {"observed", static_cast<double>(c.kept[i]) / n}});
  }
  return out;
}

// Verify step costs on the target for 0..max_draft drafts at batch 1, and the draft's forwards as
// a step runs them (draft_forwards_after_target: the first right after the verify step, then the
// next ones), measured in rounds: each round times each once (the median of 8 steps). With `text`,
// each step feeds another window of it (verify_step_seconds): what the bounds charge. Without,
// random tokens and the same step repeated, as the bench measured before: a repeated step finds its
// experts in the cache, and random tokens route unlike text, so on the default pair it gave verify
// steps of 3-5 drafts 10-15% below what they cost in the decode loop.
class step_costs {
 public:
  step_costs(const pair_models& p, gpu::backend& dev, int context, int max_draft,
             const std::vector<int32_t>* text)
      : p_(p),
        dev_(dev),
        context_(context),
        text_(text),
        rounds_(static_cast<size_t>(max_draft) + 3) {}

  void measure(int rounds) {
    const int max_draft = static_cast<int>(rounds_.size()) - 3;
    for (int r = 0; r < rounds; ++r) {
      for (int d = 0; d <= max_draft; ++d) {
        rounds_[static_cast<size_t>(d)].push_back(
            verify_step_seconds(*p_.target, dev_, 1, context_, d, 8, text_));
      }
      const draft_forward_seconds drafts = draft_forwards_after_target(
          *p_.target, *p_.draft, dev_, context_, max_draft, 8, p_.draft_window);
      rounds_[rounds_.size() - 2].push_back(drafts.next);
      rounds_.back().push_back(drafts.first);
    }
  }
  /// Each length's median over every round so far: a round taken in a burst of other work on
  /// the machine moves it little.
  bound_costs medians() const {
    std::vector<double> out;
    for (std::vector<double> v : rounds_) {
      std::sort(v.begin(), v.end());
      out.push_back(v[v.size() / 2]);
    }
    bound_costs c;
    c.first_draft = out.back();
    out.pop_back();
    c.draft = out.back();
    out.pop_back();
    c.verify = std::move(out);
    return c;
  }
  int rounds() const { return static_cast<int>(rounds_.front().size()); }

 private:
  const pair_models& p_;
  gpu::backend& dev_;
  int context_;
  const std::vector<int32_t>* text_;
  // Each round's seconds: per verify length, then the draft forward back to back and after a
  // verify step.
  std::vector<std::vector<double>> rounds_;
};

status record_events(const pair_options& o, const pair_models& p, gpu::backend& dev,
                     const bound_costs& cost, json& out) {
  std::ofstream file(o.record_events);
  if (!file) return error(errc::io_error, "cannot write " + o.record_events);
  const auto prompts = windows(p.fit_tokens, o.prompts, o.prompt_tokens);
  row_figures row;
  row.src = source::draft_fixed;
  for (const auto& prompt : prompts)
    run_row(p, dev, {prompt}, o, row);
  // The first line: what verify steps of each length and a draft forward cost, in seconds (the
  // draft both back to back and right after a verify step, as it runs in the decode loop).
  file << json{{"verify_step_s", cost.verify},
               {"draft_step_s", cost.draft},
               {"draft_step_after_target_s", cost.first_draft}}
              .dump()
       << "\n";
  for (const step_record& r : row.records) {
    json probability = json::array(), entropy = json::array();
    for (const auto& f : r.features)
      probability.push_back(f.probability), entropy.push_back(f.entropy);
    file << json{{"probability", probability}, {"entropy", entropy}, {"kept", r.kept}}.dump()
         << "\n";
  }
  out["recorded_steps"] = row.records.size();
  out["acceptance_by_position"] = row.acceptance_by_position();
  return ok_status();
}

// A row's speed over plain decoding's: the median over its runs of the run's tokens per second
// over plain decoding's on the same prompts in the same round. The pairs are seconds apart, so a
// burst of other work on the shared cores moves one pair, not the figure, as it would move a
// ratio of sums. Rows that did not run alongside (different run counts) fall back to that.
double ratio_of(const row_figures& r, const row_figures& plain) {
  if (!r.run_rates.empty() && r.run_rates.size() == plain.run_rates.size()) {
    std::vector<double> ratios;
    for (size_t i = 0; i < r.run_rates.size(); ++i)
      ratios.push_back(r.run_rates[i] / plain.run_rates[i]);
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    return n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  }
  return plain.tokens_per_s() > 0 ? r.tokens_per_s() / plain.tokens_per_s() : 0.0;
}

json row_json(const row_figures& r, const row_figures& plain, double bound,
              double bound_with_drafts) {
  return {{"source", to_string(r.src)},
          {"gate", r.measured ? "measured" : "off"},
          {"concurrency", r.concurrency},
          {"tokens_per_s", r.tokens_per_s()},
          {"verified_per_step", r.per_step(r.verified)},
          {"drafted_per_step", r.per_step(r.computed)},
          {"acceptance", r.acceptance()},
          {"speedup", ratio_of(r, plain)},
          {"bound", bound},
          {"bound_with_drafts", bound_with_drafts},
          {"first_token_ms", r.first_token_ms()},
          {"acceptance_by_position", r.acceptance_by_position()},
          {"conditional_acceptance_by_position", r.conditional_acceptance()},
          {"same_tokens", r.same_tokens}};
}

// Whether the gate has measured the batch class of `batch` sequences.
bool decided(const model::speculation_gate& gate, int batch) {
  const int from = 1 << model::speculation_gate::class_of(batch);
  for (const auto& c : gate.view()) {
    if (c.batch_from == from) return c.decided;
  }
  return false;
}
constexpr int max_warm_passes = 64;

// Runs every source of `rows` on each prompt group in turn, rotating their order, and checks
// their tokens against plain decoding's (rows[0]). A row with the measured gate first decodes
// the groups untimed until its gate has measured the row's batch class (its grace, then a
// measurement: as in a server that has been serving a while).
void run_rows(const pair_models& p, gpu::backend& dev,
              const std::vector<std::vector<std::vector<int32_t>>>& groups, const pair_options& o,
              std::vector<row_figures>& rows, const std::function<void()>& before_round = {}) {
  for (const row_figures& r : rows) {
    if (!r.measured) continue;
    row_figures warm = make_row(r.src, r.concurrency);
    warm.measured = r.measured;
    for (int pass = 0; pass < max_warm_passes && !decided(*r.measured, r.concurrency); ++pass) {
      for (const auto& group : groups)
        run_row(p, dev, group, o, warm);
    }
  }
  for (int round = 0; round < o.rounds; ++round) {
    if (before_round) before_round();
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<std::vector<std::vector<int32_t>>> outputs(rows.size());
      for (size_t k = 0; k < rows.size(); ++k) {
        const size_t r = (k + g + static_cast<size_t>(round)) % rows.size();
        outputs[r] = run_row(p, dev, groups[g], o, rows[r]);
      }
      for (size_t r = 1; r < rows.size(); ++r)
        rows[r].same_tokens = rows[r].same_tokens && outputs[r] == outputs[0];
    }
  }
}

// With `count_drafts`, the draft model's forwards count at their measured cost (prompt lookup's
// drafting is free either way).
double row_bound(const row_figures& r, const bound_costs& cost, bool count_drafts) {
  if (r.src == source::plain) return 1.0;
  // The head's own policy: the tokens its steps yielded over what their verify steps cost.
  if (r.src == source::draft_head) {
    const double units = r.cost_units(cost) + (count_drafts ? r.draft_units(cost) : 0.0);
    return units > 0 ? static_cast<double>(r.steps + r.accepted) / units : 1.0;
  }
  return fixed_length_bound(r.conditional_acceptance(), cost,
                            count_drafts && r.src != source::lookup);
}

void add_rows(const std::vector<row_figures>& rows, const bound_costs& cost, json& out, table& t) {
  const row_figures& plain = rows[0];
  for (const row_figures& r : rows) {
    const double bound = row_bound(r, cost, false);
    const double with_drafts = row_bound(r, cost, true);
    // rows[] holds one row per source and concurrency, each measured by itself; the runs with
    // the measured gate (as served) go to measured_gate.rows[].
    json& into = r.measured ? out["measured_gate"]["rows"] : out["rows"];
    into.push_back(row_json(r, plain, bound, with_drafts));
    t.add_row({row_name(r), std::to_string(r.concurrency), fixed(r.tokens_per_s(), 1),
               fixed(r.per_step(r.verified), 2), fixed(r.per_step(r.computed), 2),
               fixed(100.0 * r.acceptance(), 1) + "%", fixed(ratio_of(r, plain), 2) + "x",
               fixed(bound, 2) + "x", fixed(with_drafts, 2) + "x", fixed(r.first_token_ms(), 2),
               r.same_tokens ? "yes" : "NO"});
  }
}

// `count` groups of `batch` prompts each, windows spread over `tokens`.
std::vector<std::vector<std::vector<int32_t>>> prompt_groups(const std::vector<int32_t>& tokens,
                                                             int batch, int count, int length) {
  std::vector<std::vector<std::vector<int32_t>>> groups(static_cast<size_t>(count));
  const auto all = windows(tokens, batch * count, length);
  for (size_t i = 0; i < all.size(); ++i)
    groups[i / static_cast<size_t>(batch)].push_back(all[i]);
  return groups;
}

// The throughput rows: plain decoding and the draft source ungated (into rows[] and `t`), and
// beside them gated as served (into gate.rows and `gated`). Where the gate does not stop drafting
// at a concurrency (it is 0, or not below it), the gated run is the ungated one and is not run
// again.
void add_concurrency_rows(const pair_models& p, gpu::backend& dev, const pair_options& o,
                          const bound_costs& cost, int gate, json& out, table& t, table& gated) {
  const source spec = p.head ? source::draft_head : source::draft_fixed;
  out["gate"] = {
      {"disable_above_batch", gate}, {"source", to_string(spec)}, {"rows", json::array()}};
  for (int c : o.concurrency) {
    // rows[3]: plain decoding again, the noise floor of every ratio at this concurrency.
    std::vector<row_figures> rows{make_row(source::plain, c), make_row(spec, c),
                                  make_row(spec, c, true), make_row(source::plain, c)};
    const bool gates = gate > 0 && c > gate;
    if (gates) {
      rows.push_back(make_row(spec, c));
      rows.back().gate = gate;
    }
    run_rows(p, dev, {windows(p.eval_tokens, c, o.prompt_tokens)}, o, rows);
    add_rows({rows[0], rows[1], rows[2]}, cost, out, t);
    const row_figures& measured = rows[2];
    const row_figures& g = gates ? rows.back() : rows[1];
    const bool same = rows[1].same_tokens && g.same_tokens && measured.same_tokens;
    out["gate"]["rows"].push_back({{"concurrency", c},
                                   {"plain_tokens_per_s", rows[0].tokens_per_s()},
                                   {"ungated_tokens_per_s", rows[1].tokens_per_s()},
                                   {"ungated_speedup", ratio_of(rows[1], rows[0])},
                                   {"gated_tokens_per_s", g.tokens_per_s()},
                                   {"gated_speedup", ratio_of(g, rows[0])},
                                   {"gate_stops_drafting", gates},
                                   {"measured_tokens_per_s", measured.tokens_per_s()},
                                   {"measured_speedup", ratio_of(measured, rows[0])},
                                   {"plain_again_speedup", ratio_of(rows[3], rows[0])},
                                   {"same_tokens", same}});
    gated.add_row({std::to_string(c), fixed(rows[0].tokens_per_s(), 1),
                   fixed(rows[1].tokens_per_s(), 1), fixed(ratio_of(rows[1], rows[0]), 2) + "x",
                   fixed(g.tokens_per_s(), 1), fixed(ratio_of(g, rows[0]), 2) + "x",
                   gates ? "off" : "on (= ungated)", fixed(measured.tokens_per_s(), 1),
                   fixed(ratio_of(measured, rows[0]), 2) + "x",
                   fixed(ratio_of(rows[3], rows[0]), 2) + "x", same ? "yes" : "NO"});
  }
}

// The largest batch up to which every batch measured gained (ratio at least 1); 0: none did.
struct crossover {
  int pays_up_to = 0;
  bool paying = true;
  void add(int batch, double ratio) {
    paying = paying && ratio >= 1.0;
    if (paying) pays_up_to = batch;
  }
};

// Plain decoding against the draft source and against prompt lookup, ungated, batch by batch:
// where speculation stops paying is where the gate belongs. With a head, the draft's fixed window
// too: as a batch grows, a verified row costs more against a plain step, and the head's choice of
// how many drafts to verify is what should keep drafting from losing as much as the window does.
std::string sweep_batches(const pair_models& p, gpu::backend& dev, const pair_options& o, int gate,
                          const std::string& gate_text, json& out) {
  const source spec = p.head ? source::draft_head : source::draft_fixed;
  const bool with_fixed = spec == source::draft_head;
  std::vector<int> batches = o.sweep_batches;
  std::sort(batches.begin(), batches.end());
  std::vector<std::string> columns{"batch", "plain tokens/s",
                                   std::string(to_string(spec)) + " tokens/s", "ratio"};
  if (with_fixed) columns.insert(columns.end(), {"draft_fixed tokens/s", "draft_fixed ratio"});
  columns.insert(columns.end(), {"lookup tokens/s", "lookup ratio", "same tokens"});
  table t(columns);
  json rows = json::array();
  crossover drafting, lookup;
  for (int b : batches) {
    std::vector<row_figures> r{make_row(source::plain, b), make_row(spec, b),
                               make_row(source::lookup, b)};
    if (with_fixed) r.push_back(make_row(source::draft_fixed, b));
    // Small batches run more groups, so that each batch decodes about as many sequences.
    const int groups = std::max(1, o.prompts / b);
    run_rows(p, dev, prompt_groups(p.eval_tokens, b, groups, o.prompt_tokens), o, r);
    drafting.add(b, ratio_of(r[1], r[0]));
    lookup.add(b, ratio_of(r[2], r[0]));
    bool same = true;
    for (size_t k = 1; k < r.size(); ++k)
      same = same && r[k].same_tokens;
    json row = {{"batch", b},
                {"plain_tokens_per_s", r[0].tokens_per_s()},
                {"speculative_tokens_per_s", r[1].tokens_per_s()},
                {"ratio", ratio_of(r[1], r[0])},
                {"lookup_tokens_per_s", r[2].tokens_per_s()},
                {"lookup_ratio", ratio_of(r[2], r[0])},
                {"same_tokens", same}};
    std::vector<std::string> cells{std::to_string(b), fixed(r[0].tokens_per_s(), 1),
                                   fixed(r[1].tokens_per_s(), 1),
                                   fixed(ratio_of(r[1], r[0]), 2) + "x"};
    if (with_fixed) {
      row["fixed_tokens_per_s"] = r[3].tokens_per_s();
      row["fixed_ratio"] = ratio_of(r[3], r[0]);
      cells.insert(cells.end(),
                   {fixed(r[3].tokens_per_s(), 1), fixed(ratio_of(r[3], r[0]), 2) + "x"});
    }
    cells.insert(cells.end(), {fixed(r[2].tokens_per_s(), 1), fixed(ratio_of(r[2], r[0]), 2) + "x",
                               same ? "yes" : "NO"});
    rows.push_back(std::move(row));
    t.add_row(cells);
  }
  out["sweep"] = {{"source", to_string(spec)},
                  {"rows", rows},
                  {"pays_up_to_batch", drafting.pays_up_to},
                  {"lookup_pays_up_to_batch", lookup.pays_up_to},
                  {"disable_above_batch", gate}};
  return "\nplain decoding against " + std::string(to_string(spec)) +
         " and prompt lookup by batch, ungated\n\n" + t.render() +
         "\nspeculation pays up to batch " + std::to_string(drafting.pays_up_to) + " (" +
         to_string(spec) + (drafting.pays_up_to == 0 ? ": slower than plain at every batch" : "") +
         "); prompt lookup pays up to batch " + std::to_string(lookup.pays_up_to) +
         "; the gate is " + gate_text + "\n";
}

// The thresholds --tune-head tries at each batch: from verifying every draft (the fixed window)
// to verifying only drafts nearly sure to hold.
struct candidate {
  double threshold, continue_threshold;
};
constexpr candidate tune_candidates[] = {{0.0, 0.0},  {0.1, 0.3},  {0.2, 0.5},
                                         {0.3, 0.6},  {0.5, 0.65}, {0.5, 0.8},
                                         {0.6, 0.85}, {0.7, 0.9},  {0.8, 0.95}};

std::string candidate_name(const candidate& c) {
  if (c.threshold == 0 && c.continue_threshold == 0) return "all";
  return fixed(c.threshold, 2) + "/" + fixed(c.continue_threshold, 2);
}

// Decodes the fitting half at each batch with the head under each candidate's thresholds, beside
// plain decoding, and keeps the fastest, never verifying more at a larger batch (monotone_choice):
// what a verified row costs against a plain step, and so which drafts pay, is the decode loop's own
// (the costs the fit's simulation charges miss some of it: on the default pair they put the head 3%
// ahead of the fixed window at batch 1, where the loop had it 6% behind). Writes the pair's head
// with those thresholds to o.tune_head.
status tune_head(const pair_options& o, const pair_models& p, gpu::backend& dev, json& out,
                 std::string& text) {
  if (!p.head) {
    return error(errc::invalid_argument,
                 "--tune-head needs the draft's confidence head (its weights): fit one with "
                 "scripts/fit_confidence_head.py first");
  }
  std::vector<int> batches = o.sweep_batches;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  if (batches.empty()) return error(errc::invalid_argument, "--tune-head needs --sweep-batches");
  std::vector<std::string> columns{"batch"};
  for (const candidate& c : tune_candidates)
    columns.push_back(candidate_name(c));
  columns.push_back("chosen");
  table t(columns);
  // speedup[b][k]: candidate k at batch b over plain decoding.
  std::vector<std::vector<double>> speedup(batches.size());
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const int b = batches[bi];
    std::vector<row_figures> rows{make_row(source::plain, b)};
    for (const candidate& c : tune_candidates) {
      auto head = std::make_shared<model::confidence_head>(*p.head);
      head->threshold = c.threshold;
      head->continue_threshold = c.continue_threshold;
      head->by_batch.clear();
      rows.push_back(make_row(source::draft_head, b));
      rows.back().head = head;
    }
    const int groups = std::max(1, o.prompts / b);
    run_rows(p, dev, prompt_groups(p.fit_tokens, b, groups, o.prompt_tokens), o, rows);
    for (size_t k = 1; k < rows.size(); ++k)
      speedup[bi].push_back(ratio_of(rows[k], rows[0]));
  }
  const std::vector<size_t> chosen = monotone_choice(speedup);
  model::confidence_head tuned = *p.head;
  tuned.by_batch.clear();
  out["tuning"] = json::array();
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const int b = batches[bi];
    const candidate& c = tune_candidates[chosen[bi]];
    std::vector<std::string> cells{std::to_string(b)};
    json ratios = json::object();
    for (size_t k = 0; k < speedup[bi].size(); ++k) {
      cells.push_back(fixed(speedup[bi][k], 3) + "x");
      ratios[candidate_name(tune_candidates[k])] = speedup[bi][k];
    }
    cells.push_back(candidate_name(c));
    t.add_row(cells);
    out["tuning"].push_back({{"batch", b}, {"speedup", ratios}, {"chosen", candidate_name(c)}});
    if (bi == 0) {  // batches below the first one tuned take its thresholds too
      tuned.threshold = c.threshold;
      tuned.continue_threshold = c.continue_threshold;
    }
    if (bi == 0 || chosen[bi] != chosen[bi - 1])
      tuned.by_batch.push_back({b, c.threshold, c.continue_threshold});
  }
  std::ofstream file(o.tune_head);
  if (!file || !(file << tuned.to_json()))
    return error(errc::io_error, "cannot write " + o.tune_head);
  out["head"] = json::parse(tuned.to_json());
  text =
      "the confidence head's thresholds by batch (threshold/continue threshold; all: every "
      "draft verified, the fixed window), speed over plain decoding on the fitting prompts\n\n" +
      t.render() + "\nwritten to " + o.tune_head + "\n";
  return ok_status();
}

// What the bounds are made of: a verify step per number of drafts on text (what the bounds
// charge) beside the same step repeated on random tokens, and a draft forward back to back (what
// `bound, drafts counted` charges) and right after a target step (as the loop's first draft
// forward of a step runs).
std::string cost_table(const bound_costs& cost, int rounds, const bound_costs& repeated) {
  table c({"step at batch 1", "ms", "over a plain step", "repeated, random tokens",
           "over a plain step "});
  auto row = [&](const std::string& name, double ours, double theirs) {
    c.add_row({name, fixed(1e3 * ours, 3), fixed(ours / cost.verify[0], 2) + "x",
               fixed(1e3 * theirs, 3), fixed(theirs / repeated.verify[0], 2) + "x"});
  };
  for (size_t d = 0; d < cost.verify.size(); ++d)
    row("verify, " + std::to_string(d) + " drafts", cost.verify[d], repeated.verify[d]);
  row("draft forward, a step's first", cost.first_draft, repeated.first_draft);
  row("draft forward, the next ones", cost.draft, repeated.draft);
  return "step costs (each step on another window of text: medians of " + std::to_string(rounds) +
         " rounds, 3 before the single-stream rows and one before each of their rounds, which the "
         "bounds charge; and the same step repeated on random tokens)\n\n" +
         c.render();
}

}  // namespace

std::vector<int64_t> start_all(model::engine& eng, const std::vector<std::vector<int32_t>>& prompts,
                               const model::request_options& req) {
  std::vector<int64_t> ids;
  for (const auto& prompt : prompts)
    ids.push_back(eng.submit(prompt, req).value());
  std::vector<model::token_event> events;
  std::set<int64_t> started;
  while (started.size() < prompts.size() && eng.step(events)) {
    for (const auto& e : events)
      started.insert(e.request);
    events.clear();
  }
  return ids;
}

status run_pair_bench(const pair_options& o, gpu::backend& dev, json& out, std::string& text) {
  auto loaded = load_pair(o, dev);
  if (!loaded) return loaded.err();
  const pair_models& p = loaded.value();
  const int positions = p.target->config.max_positions;
  if (o.prompt_tokens + o.max_tokens + o.max_draft + 1 > positions) {
    return error(errc::invalid_argument, "--pair-prompt-tokens " + std::to_string(o.prompt_tokens) +
                                             " and --pair-max-tokens " +
                                             std::to_string(o.max_tokens) +
                                             " do not fit the pair's " + std::to_string(positions) +
                                             " positions (with " + std::to_string(o.max_draft) +
                                             " drafts beyond the last token); shorten either");
  }
  const int context = o.prompt_tokens + o.max_tokens / 2;
  step_costs costs(p, dev, context, o.max_draft, &p.fit_tokens);
  costs.measure(3);
  step_costs repeated_costs(p, dev, context, o.max_draft, nullptr);
  repeated_costs.measure(3);
  const bound_costs repeated = repeated_costs.medians();
  out["repeated_step_ms"] = json::array();  // verify 0..max_draft drafts, then the draft forward
  for (double s : repeated.verify)
    out["repeated_step_ms"].push_back(1e3 * s);
  out["repeated_step_ms"].push_back(1e3 * repeated.draft);
  out["draft_attention_window"] = p.draft_window;
  auto record_costs = [&](const bound_costs& cost) {
    out["verify_step_ms"] = json::array();
    for (double s : cost.verify)
      out["verify_step_ms"].push_back(1e3 * s);
    out["draft_step_ms"] = 1e3 * cost.draft;
    out["draft_step_after_target_ms"] = 1e3 * cost.first_draft;
    out["cost_rounds"] = costs.rounds();
  };
  if (!o.record_events.empty()) {
    costs.measure(2);
    const bound_costs cost = costs.medians();
    record_costs(cost);
    return record_events(o, p, dev, cost, out);
  }
  if (!o.tune_head.empty()) return tune_head(o, p, dev, out, text);

  std::vector<source> sources{source::plain, source::lookup, source::draft_fixed,
                              source::draft_adaptive};
  if (p.head) sources.push_back(source::draft_head);
  std::vector<row_figures> single;
  for (source s : sources)
    single.push_back(make_row(s, 1));
  // The source as served: with the measured gate.
  single.push_back(make_row(p.head ? source::draft_head : source::draft_fixed, 1, true));
  std::vector<std::vector<std::vector<int32_t>>> groups;
  for (auto& prompt : windows(p.eval_tokens, o.prompts, o.prompt_tokens))
    groups.push_back({prompt});
  // The costs the bounds charge are measured in the same minutes as the steps they are set
  // against: a round of them before each round of the rows (besides the three before), so that
  // neither a burst of other work at the start nor the machine's drift over a run decides them.
  run_rows(p, dev, groups, o, single, [&] { costs.measure(1); });
  const bound_costs cost = costs.medians();
  record_costs(cost);

  table t({"source", "concurrency", "tokens/s", "verified/step", "drafted/step", "acceptance",
           "speedup", "bound", "bound, drafts counted", "first token ms", "same tokens"});
  out["rows"] = json::array();
  out["measured_gate"] = {{"rows", json::array()}};
  add_rows(single, cost, out, t);
  const int gate =
      o.gate >= 0 ? o.gate : config::default_manifest("").decode.speculation.disable_above_batch;
  table gated({"concurrency", "plain tokens/s", "ungated tokens/s", "ungated speedup",
               "gated tokens/s", "gated speedup", "drafting when gated", "measured gate tokens/s",
               "measured gate speedup", "plain again", "same tokens"});
  add_concurrency_rows(p, dev, o, cost, gate, out, t, gated);
  const std::string gate_text = "disable_above_batch " + std::to_string(gate) +
                                (gate == 0 ? ", never stops drafting" : "") +
                                (o.gate >= 0 ? " (--gate)" : " (brigade serve's default)");
  text = t.render();
  if (o.served) {
    served_options so;
    so.target_dir = o.dir + "/target";
    so.draft_dir = o.dir + "/draft";
    so.prompts = windows(p.eval_tokens, o.prompts, o.prompt_tokens);
    so.max_tokens = o.max_tokens;
    so.rounds = o.rounds;
    auto served = run_served_rows(so, out);
    if (!served) return served.err();
    text += "\n" + served.value();
  }
  text += "\n" + cost_table(cost, costs.rounds(), repeated);
  if (!o.concurrency.empty()) {
    text += "\nthe utility gates: " + gate_text +
            "; the measured gate (model/speculation_gate.hpp)\n"
            "once it has measured (untimed passes first); plain again: plain decoding run a\n"
            "second time beside the others, the noise floor of these ratios; speedups are medians\n"
            "of per-run ratios (the same prompts, the same round)\n\n" +
            gated.render();
  }
  if (!o.sweep_batches.empty()) text += sweep_batches(p, dev, o, gate, gate_text, out);
  if (p.head) {
    // Calibration on the fixed window's steps: every draft reached there was verified, whatever
    // the head would have said.
    out["calibration"] = calibration(*p.head, single[2].records);
    table cal({"predicted bucket", "drafts", "mean predicted", "observed"});
    for (const auto& b : out["calibration"])
      cal.add_row({b["bucket"].get<std::string>(), std::to_string(b["drafts"].get<int64_t>()),
                   fixed(b["predicted"].get<double>(), 3), fixed(b["observed"].get<double>(), 3)});
    text += "\ncalibration of the confidence head (draft_fixed steps)\n\n" + cal.render();
    out["threshold"] = p.head->threshold;
    out["head"] = json::parse(p.head->to_json());  // its thresholds by batch too
  }
  return ok_status();
}

}  // namespace brigade::bench

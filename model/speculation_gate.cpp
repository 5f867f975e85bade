#include "model/speculation_gate.hpp"

#include <algorithm>
#include <cmath>

namespace brigade::model {
namespace {

template <class Sample>
double median_seconds(const std::vector<Sample>& samples) {
  std::vector<double> seconds;
  for (const Sample& s : samples)
    seconds.push_back(s.seconds);
  const auto middle = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
  std::nth_element(seconds.begin(), middle, seconds.end());
  double median = *middle;
  if (seconds.size() % 2 == 0) median = (median + *std::max_element(seconds.begin(), middle)) / 2;
  return median;
}

// A step slower than this many times its kind's median was slowed by something other than what
// it computed: a preemption, or a burst of other work on shared cores, which can last several
// steps. Drafting steps differ by nature (one draft verified, or six; the draft's catch-up of a
// context) but rarely by more than this around their median; plain steps hardly differ at all.
constexpr double disturbed_over_median = 2.5;

// A kind's pace: its tokens over its time, summed over its steps but for disturbed ones. The same
// rule for both kinds, so that neither is favoured: a sum weighs drafting's unlike steps right,
// and leaving out what the median marks as disturbed keeps a burst that slowed a few plain steps
// from making drafting look faster than it is (in a large batch that costs a third of the speed
// until the next measurement). With it, how far off the pace may be: its relative standard
// error, as a ratio of sums has it (the spread of tokens - pace x seconds over the steps). A
// drafting step yields one token or six as the drafts happen to be kept, so eight of them say
// little; plain steps hardly differ.
struct pace_estimate {
  double rate = 0.0;
  double relative_error = 0.0;
};

template <class Sample>
pace_estimate pace(const std::vector<Sample>& samples) {
  pace_estimate out;
  if (samples.empty()) return out;
  const double limit = disturbed_over_median * median_seconds(samples);
  double total_s = 0.0, tokens = 0.0;
  int n = 0;
  for (const Sample& s : samples) {
    if (s.seconds > limit) continue;
    total_s += s.seconds;
    tokens += s.tokens;
    ++n;
  }
  if (total_s <= 0) return out;
  out.rate = tokens / total_s;
  if (n < 2 || tokens <= 0) return out;
  double squares = 0.0;
  for (const Sample& s : samples) {
    if (s.seconds > limit) continue;
    const double residual = s.tokens - out.rate * s.seconds;
    squares += residual * residual;
  }
  // Var(rate) ~ sum of residuals^2 / (n (n - 1) mean_seconds^2); relative to the rate itself.
  const double mean_s = total_s / n;
  out.relative_error = std::sqrt(squares / (n * (n - 1.0))) / mean_s / out.rate;
  return out;
}

// A class with less than this share of the recent steps is a batch's tail or a passing load.
constexpr double tail_share = 0.25;

}  // namespace

speculation_gate::speculation_gate(const settings& s) : settings_(s) {
  settings_.grace_steps = std::max(0, settings_.grace_steps);
  settings_.class_steps = std::max(0, settings_.class_steps);
  settings_.measure_steps = std::max(2, settings_.measure_steps);
  settings_.measure_block = std::max(1, settings_.measure_block);
  settings_.first_hold = std::max(1, settings_.first_hold);
  settings_.max_hold = std::max(settings_.first_hold, settings_.max_hold);
}

int speculation_gate::class_of(int decoding) {
  int c = 0;
  for (int n = std::max(1, decoding); n > 1 && c + 1 < classes; n /= 2)
    ++c;
  return c;
}

bool speculation_gate::allow(int decoding, bool measurable) {
  current_ = class_of(decoding);
  current_first_ = false;
  batch_class& c = classes_[static_cast<size_t>(current_)];
  c.seen = true;
  ++c.steps;
  if (steps_++ < settings_.grace_steps) {
    current_ = -1;  // not a measurement
    return true;
  }
  // Each class's share of the recent steps, decaying over about 2 x class_steps steps.
  const double decay = 1.0 / (2.0 * std::max(1, settings_.class_steps));
  for (batch_class& other : classes_)
    other.recent *= 1.0 - decay;
  c.recent += decay;
  if (!c.decided && (c.steps <= settings_.class_steps || c.recent < tail_share)) {
    current_drafts_ = nearest_decision(current_);
    current_ = -1;
    if (!current_drafts_) ++held_off_;
    return current_drafts_;
  }
  if (!c.measuring && c.steps_left <= 0) {
    c.measuring = true;
    c.calls = 0;
    c.drafted.clear();
    c.plain.clear();
    c.drafted_first.clear();
    c.plain_first.clear();
  }
  if (c.measuring && !measurable) {
    // Prefill rows would spoil the measure, and a drafting step here would still make the draft
    // catch whole contexts up: the step follows what is known and the measurement waits.
    current_drafts_ = c.decided ? c.drafting : nearest_decision(current_);
    current_ = -1;
  } else if (c.measuring) {
    // Alternating runs, so that both kinds see the same load on the machine and the same text.
    const int block = settings_.measure_block;
    const int call = c.calls++;
    current_drafts_ = (call / block) % 2 == 0;
    current_first_ = block > 1 && call % block == 0;
  } else {
    current_drafts_ = c.drafting;
    --c.steps_left;
  }
  if (!current_drafts_) ++held_off_;
  return current_drafts_;
}

void speculation_gate::record(double seconds, int tokens, bool measured) {
  if (current_ < 0) return;
  batch_class& c = classes_[static_cast<size_t>(current_)];
  current_ = -1;
  if (!c.measuring || !measured || tokens <= 0 || seconds <= 0) return;
  if (current_first_) {
    (current_drafts_ ? c.drafted_first : c.plain_first).push_back({seconds, tokens});
    current_first_ = false;
    return;
  }
  (current_drafts_ ? c.drafted : c.plain).push_back({seconds, tokens});
  const size_t each = static_cast<size_t>(settings_.measure_steps) / 2;
  if (c.drafted.size() < each || c.plain.size() < each) return;
  // Paces within close_call of the margin, or whose ratio lies fewer than `significance`
  // standard errors from it, are as likely noise as a difference: measure on, up to
  // max_measure_steps, then go by the paces as they stand. Steps of two kinds that close cost
  // little whichever runs.
  const pace_estimate drafted = pace(c.drafted), plain = pace(c.plain);
  c.drafting_rate = drafted.rate;
  c.plain_rate = plain.rate;
  const double ratio = c.plain_rate > 0 ? c.drafting_rate / c.plain_rate : 0.0;
  const bool close = std::abs(ratio - (1.0 + settings_.margin)) < settings_.close_call;
  const double error = std::hypot(drafted.relative_error, plain.relative_error);
  const bool clear = ratio > 0 && std::abs(std::log(ratio / (1.0 + settings_.margin))) >=
                                      settings_.significance * error;
  const size_t most =
      static_cast<size_t>(std::max(settings_.measure_steps, settings_.max_measure_steps)) / 2;
  if ((clear && !close) || c.drafted.size() >= most || c.plain.size() >= most) decide(c);
}

void speculation_gate::decide(batch_class& c) {
  const bool drafting = c.drafting_rate > c.plain_rate * (1.0 + settings_.margin);
  c.hold = c.decided && drafting == c.drafting ? std::min(2 * c.hold, settings_.max_hold)
                                               : settings_.first_hold;
  c.drafting = drafting;
  c.hold = std::max(c.hold, hold_for_cost(c));
  c.decided = true;
  c.measuring = false;
  c.steps_left = c.hold;
  ++c.measurements;
}

int speculation_gate::hold_for_cost(const batch_class& c) const {
  const double rate = c.drafting ? c.drafting_rate : c.plain_rate;
  const std::vector<sample>& winning = c.drafting ? c.drafted : c.plain;
  const std::vector<sample>& losing = c.drafting ? c.plain : c.drafted;
  const std::vector<sample>& losing_first = c.drafting ? c.plain_first : c.drafted_first;
  if (settings_.measure_share <= 0 || rate <= 0 || winning.empty()) return 0;
  // Every losing step counts, a slow outlier and the first of each run too: the decoder spent
  // that time.
  double extra_s = 0.0;
  for (const auto* steps : {&losing, &losing_first}) {
    for (const sample& s : *steps)
      extra_s += s.seconds - s.tokens / rate;
  }
  double winning_s = 0.0;
  for (const sample& s : winning)
    winning_s += s.seconds;
  const double step_s = winning_s / static_cast<double>(winning.size());
  if (extra_s <= 0 || step_s <= 0) return 0;
  const double steps = extra_s / (settings_.measure_share * step_s);
  return static_cast<int>(std::min(steps, static_cast<double>(settings_.max_hold)));
}

bool speculation_gate::expects_drafting(int decoding) const {
  const int i = class_of(decoding);
  const batch_class& c = classes_[static_cast<size_t>(i)];
  // A measurement under way drafts in half its steps.
  if (c.measuring && (c.decided || c.calls > 0)) return true;
  return c.decided ? c.drafting : nearest_decision(i);
}

bool speculation_gate::nearest_decision(int i) const {
  for (int d = 1; d < classes; ++d) {
    for (int j : {i - d, i + d}) {
      if (j < 0 || j >= classes) continue;
      const batch_class& c = classes_[static_cast<size_t>(j)];
      if (c.decided) return c.drafting;
    }
  }
  return true;
}

std::vector<speculation_gate::class_view> speculation_gate::view() const {
  std::vector<class_view> out;
  for (int i = 0; i < classes; ++i) {
    const batch_class& c = classes_[static_cast<size_t>(i)];
    if (!c.seen) continue;
    class_view v;
    v.batch_from = 1 << i;
    v.steps = c.steps;
    v.decided = c.decided;
    v.drafting = c.drafting;
    v.drafting_tokens_per_s = c.drafting_rate;
    v.plain_tokens_per_s = c.plain_rate;
    v.measurements = c.measurements;
    out.push_back(v);
  }
  return out;
}

}  // namespace brigade::model

// The measured utility gate: whether drafting pays, found by timing the decoder's own steps.
//
// A verify step costs more than a plain one (each fed draft is a row, and on a mixture of experts
// each row reads its own experts), and a draft model costs its forward on top. Where the drafts
// kept do not repay that, speculation slows decoding down. Where that point lies depends on the
// model pair, the hardware, the batch and the text, so no fixed rule (disable_above_batch) finds
// it; the gate measures it instead, per batch class (1, 2-3, 4-7, ... sequences decoding):
//
//   grace      the decoder's first grace_steps steps draft as asked: a short run (a test, one
//              request) sees speculation exactly as configured, and only a decoder that runs
//              long pays for measuring.
//   borrowing  a class seen fewer than class_steps times, or making up less than a quarter of
//              the last 2 x class_steps steps or so (the tail of a batch, a passing load), follows
//              the nearest class that was measured: measuring it would cost more than its few
//              steps can gain, and each of its drafting steps makes the draft catch up whole
//              contexts. A batch's tail comes back pass after pass, a few steps each time, so its
//              total alone would get it measured.
//   measuring  a few steps (more while the two paces are close, or their difference is within
//              the noise of the steps measured so far), in runs of measure_block of each kind
//              whose first steps are not measured (they pay for the other kind's), half of them
//              without
//              drafts: tokens per second drafting against tokens per second plain, each summed over
//              its own steps but for those slower than 2.5 times its kind's median (a preemption, a
//              burst of other work on shared cores: they do not decide)
//   decided    drafting stays on only if it was at least `margin` faster; the decision holds for
//              `first_hold` steps of its class, then is measured again. A decision measured
//              the same way again holds twice as long (up to max_hold), so a pair that never
//              pays soon costs almost nothing, and a change (other text, other load) is found.
//              A measurement costs what its losing steps took beyond the winner's pace (for a
//              draft model, its first drafting step also catches whole contexts up), so a
//              decision also holds until that cost is at most `measure_share` of the class's
//              time: a pair that loses badly is measured rarely from the start.
//
// Outputs never depend on it: speculation is lossless, so drafting or not changes only speed.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace brigade::model {

class speculation_gate {
 public:
  struct settings {
    int grace_steps = 256;   ///< Steps of the decoder before any measurement.
    int class_steps = 64;    ///< Steps of a class before its own first measurement.
    int measure_steps = 16;  ///< Measured steps per measurement, half of them plain.
    /// While measuring, steps of one kind run this many in a row, and the first of each run is
    /// not measured (its cost still counts): it follows the other kind, and is slowed by what
    /// that left in the caches (a draft model's catch-up of long contexts evicts the target's
    /// keys and values; plain steps right after one ran at half their pace). 1: alternate every
    /// step, and measure each.
    int measure_block = 4;
    /// A measurement whose drafting pace is within close_call of (1 + margin) times plain's goes
    /// on, up to max_measure_steps steps: with a handful of steps a kind, a gain of a few percent
    /// is within the noise, and deciding on it turns a paying pair off (or on) by chance.
    double close_call = 0.05;
    /// Nor does a measurement decide before the paces' ratio lies this many standard errors
    /// from 1 + margin (each pace's error from the spread of its steps): eight drafting steps
    /// that happened to keep many drafts once made a pair 20% slower per token look 13% faster.
    double significance = 2.0;
    int max_measure_steps = 64;
    int first_hold = 256;  ///< Steps a new decision holds before it is measured again.
    int max_hold = 8192;   ///< The longest hold, after the same decision again and again.
    double margin = 0.02;  ///< How much faster per token drafting must be to stay on.
    /// The most of a class's decoding time its measurements may cost (see above); 0 or less:
    /// holds follow first_hold and max_hold alone.
    double measure_share = 0.01;
  };
  /// Batch classes: decoding sequences 1, 2-3, 4-7, ..., and 2^(classes-1) or more.
  static constexpr int classes = 12;

  speculation_gate() : speculation_gate(settings{}) {}
  explicit speculation_gate(const settings& s);

  /// Whether a step in which `decoding` sequences decode may draft. Call once per such step,
  /// then record() it. A step that will also carry prefill rows is not `measurable`: a
  /// measurement skips it (it follows the class's decision, or the nearest measured class's).
  bool allow(int decoding, bool measurable = true);
  /// Whether steps of `decoding` sequences are likely to draft, as far as the gate knows now
  /// (their class's decision, or the nearest measured class's; a class being measured drafts
  /// in half its steps). Changes nothing: for work that pays only where drafting follows.
  bool expects_drafting(int decoding) const;
  /// The step allow() was last asked about ended after `seconds`, its decoding sequences having
  /// produced `tokens`. A step that also carried prefill rows is no measure of decoding:
  /// `measured` false.
  void record(double seconds, int tokens, bool measured = true);

  /// What the gate knows of one batch class.
  struct class_view {
    int batch_from = 1;                ///< The class's smallest batch.
    int64_t steps = 0;                 ///< Steps asked about.
    bool decided = false;              ///< A measurement has ended.
    bool drafting = true;              ///< Its decision (true until one is made).
    double drafting_tokens_per_s = 0;  ///< The last measurement's figures (0: none yet).
    double plain_tokens_per_s = 0;
    int64_t measurements = 0;
  };
  /// The classes that have seen a step.
  std::vector<class_view> view() const;
  /// Steps in which the gate kept drafting off (decisions, and measurements' plain steps).
  int64_t held_off_steps() const { return held_off_; }

  static int class_of(int decoding);

 private:
  struct sample {
    double seconds = 0;
    int tokens = 0;
  };
  struct batch_class {
    bool seen = false;
    int64_t steps = 0;  // steps asked about
    bool measuring = true;
    bool drafting = true;  // the decision, or the kind of the step in flight while measuring
    bool decided = false;
    int hold = 0;        // the current decision's hold length
    int steps_left = 0;  // steps before the next measurement
    int calls = 0;       // steps asked about during this measurement
    std::vector<sample> drafted, plain;
    std::vector<sample> drafted_first, plain_first;  // each run's first step: its cost only
    double drafting_rate = 0, plain_rate = 0;
    int64_t measurements = 0;
    double recent = 0;  // its share of the recent steps (allow())
  };
  void decide(batch_class& c);
  // Steps the decision just made must hold for its measurement to cost at most measure_share.
  int hold_for_cost(const batch_class& c) const;
  // The decision of the measured class nearest to class `i` (the smaller one on a tie); true
  // before any class was measured.
  bool nearest_decision(int i) const;

  settings settings_;
  std::array<batch_class, classes> classes_{};
  int64_t steps_ = 0;           // steps asked about, every class
  int current_ = -1;            // the class of the step in flight
  bool current_drafts_ = true;  // whether that step drafts
  bool current_first_ = false;  // whether it is the first of a measurement's run of its kind
  int64_t held_off_ = 0;
};

}  // namespace brigade::model

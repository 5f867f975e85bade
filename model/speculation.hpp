// Speculative decoding: a decoding sequence feeds draft tokens after its last token, and one step
// verifies them all: each fed token gets a logits row, and a draft survives only if it is what
// plain decoding would have produced there. Drafts come from a draft_source
// (model/draft_source.hpp): prompt lookup, here, drafts the tokens that followed the same few
// tokens earlier in the sequence's own context (agents resend tool output, code repeats names);
// a small draft model (model/draft_model.hpp) drafts what it would say next.
//
// Prompt lookup drafts only trustworthy tokens: a continuation needs the agreement of at least
// min_trust of the earlier places its n-gram occurred, so a context that continued differently each
// time drafts nothing and costs nothing. And a sequence drafts only as far as its drafts have
// lately held, and rests from drafting while they fail (draft_window): every draft after the first
// wrong one is computed for nothing, and a verify step of many tokens costs several plain steps on
// a CPU.
//
// Lossless by construction: every token is sampled from its own row with the draw index it would
// have had without speculation, and a draft is kept only while it equals that sample. Greedy and
// seeded sampled output are therefore token for token those of plain decoding, not merely drawn
// from the same distribution, and batch-invariant kernels make the logits rows the same bits too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/confidence_calibration.hpp"
#include "model/logits_rules.hpp"
#include "model/sampler.hpp"

namespace brigade::model {

/// Where drafts come from.
enum class draft_kind : int32_t {
  none = 0,    ///< No drafts: speculation is off whatever max_draft says.
  lookup = 1,  ///< Prompt lookup in the sequence's own context.
  model = 2,   ///< A small dense draft model sharing the target's tokenizer.
};

const char* to_string(draft_kind k);

/// Drafts per step a draft model proposes unless told otherwise.
constexpr int default_model_drafts = 5;

struct speculation_options {
  int max_draft = 0;  ///< Tokens drafted per sequence and step; 0 turns speculation off.
  draft_kind draft = draft_kind::lookup;  ///< Where the drafts come from.
  std::string draft_model;  ///< The draft checkpoint's directory, when draft is model.
  /// Positions a draft model's rows attend to, the most recent; 0: the whole context; -1 (the
  /// default): the draft's own setting, from the draft_settings.json beside its weights
  /// (model/draft_settings.hpp), else the whole context. A window keeps a draft's forward at the
  /// same cost at any context length (unbounded, its attention outgrew the rest of it: at
  /// 1,000-token prompts the default pair's draft gained 1.10x where it gains 1.29x with 256),
  /// and a small draft trained on short windows guesses better for it (there 57% of its drafts
  /// kept against 48%). Verification decides every token either way.
  int draft_attention_window = -1;
  int max_ngram = 4;           ///< Longest suffix of the context looked up.
  int min_ngram = 2;           ///< Shortest suffix looked up; shorter matches are too common.
  double min_trust = 0.5;      ///< Share of earlier occurrences that must agree on a draft token.
  int lookback_tokens = 4096;  ///< How far back the lookup searches (bounds its cost).
  bool adaptive = true;        ///< Each sequence drafts as far as its drafts hold (draft_window).
  /// No sequence drafts while more than this many decode together; 0 never stops them. A big
  /// batch already keeps the hardware busy, and verify steps then cost throughput (one user gains
  /// far more from speculation than a full cluster does).
  int disable_above_batch = 0;
  /// The decoder times its own steps and drafts only where drafting is faster per token, batch
  /// class by batch class (model/speculation_gate.hpp). Off: every step may draft.
  bool measured_gate = true;

  bool enabled() const { return max_draft > 0 && draft != draft_kind::none; }
  /// Whether a step with `decoding` sequences may draft at all.
  bool drafts_at(int decoding) const {
    return enabled() && (disable_above_batch == 0 || decoding <= disable_above_batch);
  }
};

/// Up to `limit` draft tokens continuing `context` (prompt and generated tokens so far), each
/// trusted by at least options.min_trust of the matches of the longest suffix that occurs before.
std::vector<int32_t> draft_tokens(const std::vector<int32_t>& context, int limit,
                                  const speculation_options& options);

/// The tokens a verify step yields. Row i of `rows` holds the logits after the i-th fed token (the
/// last accepted token, then each draft); there are draft_count + 1 rows. Token i is sampled from
/// row i with draw index first_draw + i; the next row is used only while token i equals draft i.
/// Returns 1 to draft_count + 1 tokens: the accepted drafts, then the first token plain decoding
/// would have produced after them.
/// Each row goes through `rules` (the sequence before the first fed token), which follow the
/// accepted drafts; with top_logprobs >= 0 each yielded token carries its log-probabilities.
struct verified_tokens {
  std::vector<int32_t> tokens;
  std::vector<position_logprobs> logprobs;  ///< One per token, when asked for.
};
verified_tokens verify_drafts(const float* rows, int vocab, const sampling_params& sampling,
                              uint64_t first_draw, const std::vector<int32_t>& drafts,
                              logits_rules rules, int top_logprobs = -1);

/// How many drafts one sequence may feed, step by step. Adaptive: one more than its last verify
/// step accepted, so that a sequence whose drafts hold grows by one per step; after a step that
/// accepted none, the sequence rests from drafting for 1, 2, 4 ... up to max_rest_steps steps
/// (doubling while its drafts keep failing) and then tries a single draft. A sequence whose
/// drafts fail thus costs almost nothing, and one whose drafts start to hold is back at full
/// length within a few steps. Not adaptive: always max_draft.
class draft_window {
 public:
  static constexpr int max_rest_steps = 64;

  draft_window() = default;
  explicit draft_window(const speculation_options& o) : next_(o.max_draft) {}

  /// The drafts allowed in this step; call once per decode step of the sequence.
  int take() {
    if (resting_ == 0) return next_;
    --resting_;
    return 0;
  }
  /// What the step's verification found.
  void record(const speculation_options& o, int drafted, int accepted) {
    if (drafted == 0 || !o.adaptive) return;
    if (accepted == 0) {
      resting_ = rest_steps_;
      rest_steps_ = std::min(2 * rest_steps_, max_rest_steps);
      next_ = 1;
      return;
    }
    rest_steps_ = 1;
    next_ = std::min(o.max_draft, accepted + 1);
  }

 private:
  int next_ = 0;
  int resting_ = 0;     // steps left without drafts
  int rest_steps_ = 1;  // the next rest's length
};

/// Counts a decoder keeps of its speculation.
struct speculation_stats {
  int64_t verify_steps = 0;    ///< Sequence-steps that fed at least one draft.
  int64_t drafted_tokens = 0;  ///< Draft tokens fed: those the target verified.
  /// Draft tokens the source computed: those fed, and those a confidence head cut after the
  /// draft model had computed them (model/draft_model.hpp). Add with add_proposed().
  int64_t proposed_tokens = 0;
  int64_t accepted_tokens = 0;  ///< Draft tokens kept.
  int64_t emitted_tokens = 0;   ///< Tokens the verify steps produced (accepted plus one each).
  /// Steps that drafted nothing because more sequences decoded than disable_above_batch.
  int64_t batch_limited_steps = 0;
  /// Steps that drafted nothing because the measured gate held drafting off: where it found
  /// drafting slower, and the plain steps of its measurements.
  int64_t gated_steps = 0;
  /// Per draft index i (0 is the first draft after the last token): drafts fed there, and those
  /// kept. A draft is kept only after every draft before it was, so the acceptance at index i,
  /// accepted_at[i] / drafted_at[i], is conditional on reaching i. At most max_draft entries.
  std::vector<int64_t> drafted_at;
  std::vector<int64_t> accepted_at;
  /// The confidence head's predictions against verification's outcomes, when a head decides
  /// (model/confidence_head.hpp, confidence_head::calibrate says which drafts count).
  confidence_calibration calibration;

  /// One verify step of a sequence: `drafted` drafts fed, `produced` tokens yielded.
  void add(int drafted, int produced);
  /// A verify step's proposal: `computed` drafts computed (0 from a source that does not count
  /// them, prompt lookup), `fed` of them fed.
  void add_proposed(int computed, int fed) { proposed_tokens += std::max(computed, fed); }
  /// Adds another decoder's counts (a sum over decode workers).
  void merge(const speculation_stats& other);
};

}  // namespace brigade::model

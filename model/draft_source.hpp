// Where a decoder's speculative drafts come from: prompt lookup (model/prompt_lookup.hpp) or a
// small draft model (model/draft_model.hpp), behind one interface. The decoder (the engine, a
// decode worker) asks once per step for every decoding sequence that may draft, verifies the
// drafts against the target (model/speculation.hpp), and tells the source what was kept:
//
//   propose(sequences) --> drafts, each with its features --> [target verifies]
//        ^                                                          |
//        +------------------ accepted(id, kept) <------------------+
//   release(id): the sequence finished, was cancelled or moved away; its state goes.
//   prefilled(contexts): the target prefilled these prompts (chunk by chunk); a draft model
//                        follows them in the same step, where the decoder prefills itself.
//
// Verification alone decides the output, so no source can change a token: a source only decides
// how many drafts survive, and what they cost.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/loaded_model.hpp"
#include "model/speculation.hpp"

namespace brigade::model {

/// What a source knew about one draft token when it proposed it: the record a confidence head
/// would read to decide how far to trust a draft.
struct draft_feature {
  float probability = 0.0f;  ///< The draft's probability of the token it chose (softmax).
  float entropy = 0.0f;      ///< Entropy of the draft's distribution there, in nats.
  int32_t index = 0;         ///< The draft's index in its step's drafts (0 is the first).
  int32_t position = 0;      ///< The token's position in its sequence.
};

/// One decoding sequence that may draft this step.
struct draft_sequence {
  int64_t id = 0;  ///< The decoder's name for it, stable across steps.
  /// Prompt and accepted tokens, in order; the step feeds the last one after the drafts' KV.
  const std::vector<int32_t>* tokens = nullptr;
  int limit = 0;  ///< Drafts it may feed this step (at least 1).
};

/// A sequence whose prompt the target is prefilling: its first `length` tokens are now in the
/// target's cache.
struct draft_context {
  int64_t id = 0;
  const std::vector<int32_t>* tokens = nullptr;
  int length = 0;
};

/// The drafts of one sequence.
struct draft_proposal {
  std::vector<int32_t> tokens;
  /// One per token from sources that have a distribution (a draft model); empty from prompt
  /// lookup.
  std::vector<draft_feature> features;
  /// Drafts the source computed, those a confidence head cut (model/confidence_head.hpp)
  /// included: what drafting cost, beside what the target verifies.
  int computed = 0;
};

struct confidence_head;

class draft_source {
 public:
  virtual ~draft_source() = default;

  /// Drafts for each of `sequences`, in their order (out is resized to match); at most
  /// sequences[i].limit for sequence i, possibly none.
  virtual void propose(const std::vector<draft_sequence>& sequences,
                       std::vector<draft_proposal>& out) = 0;
  /// Verification of sequence `id`'s last proposal kept its first `kept` drafts.
  virtual void accepted(int64_t id, int kept) = 0;
  /// Sequence `id` is gone; any state kept for it is freed.
  virtual void release(int64_t id) = 0;
  /// The target has just prefilled these sequences' prompts up to each one's length. A source
  /// that follows contexts (a draft model) takes them now, beside the target's prefill, so that
  /// a sequence's first drafting step does not stall on its whole prompt; others ignore it.
  virtual void prefilled(const std::vector<draft_context>& contexts) { (void)contexts; }
  /// How a draft model holds its weights ("int8" or "as_stored", draft_model::weight_format);
  /// empty for a source without weights.
  virtual std::string weight_format_name() const { return ""; }
  /// The positions a draft model's rows attend to, the most recent (0: all; a source without a
  /// model attends to nothing and says 0).
  virtual int attention_window() const { return 0; }
};

/// Sizes of the state a source keeps beside its decoder.
struct draft_source_limits {
  int kv_tokens = 32768;      ///< A draft model's KV capacity (the decoder's is enough).
  int block_tokens = 16;      ///< Tokens per KV block.
  int max_step_tokens = 256;  ///< Tokens one draft-model forward takes at most.
  /// Tokens a draft model feeds per step to catch sequences up (a new prompt, or a context it
  /// stopped following while drafting was off), or 0 for no bound. A sequence still catching up
  /// after them gets no drafts that step: its context is fed a chunk a step, as the target's
  /// prompt is, instead of in one stall of every sequence in the batch (eight 1536-token prompts
  /// took a draft 221 ms at once on the 2-core VM).
  int catch_up_tokens = 0;
  /// Positions each of a draft model's rows attends to, the most recent; 0: all of them
  /// (make_draft_source sets it: speculation_options::draft_attention_window, or the draft's own).
  int attention_window = 0;
};

/// The source `options` asks for: null when speculation is off, prompt lookup, or a draft model
/// running `draft` (loaded by draft_model::load for this target; required for draft_kind::model).
/// A draft model with a confidence `head` stops drafting a sequence where the head would not
/// verify its next draft; prompt lookup has no features and ignores it.
std::unique_ptr<draft_source> make_draft_source(
    const speculation_options& options, std::shared_ptr<const loaded_model> draft,
    const draft_source_limits& limits, std::shared_ptr<const confidence_head> head = nullptr);

}  // namespace brigade::model

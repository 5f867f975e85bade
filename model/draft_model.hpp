// A small dense model (qwen3, qwen2, llama) drafting for a larger target that shares its
// tokenizer. It runs beside the target's sequences with a KV cache and block pool of its own, on
// the target's device, and drafts greedily.
//
// One step, for the sequences that may draft (a sequence resting from drafting costs nothing):
//
//   catch up  every sequence feeds the tokens the draft has not stored yet: a new sequence its
//             whole context; afterwards the token verification added, and the last kept draft
//             when it was never fed. All sequences go in one forward (more when they exceed
//             max_step_tokens); the row after each one's last token gives its draft 0.
//   draft     one forward per further draft index: every sequence still under its limit feeds
//             its previous draft and takes the argmax of the row.
//   accepted  the sequence's stored length becomes its tokens plus the kept drafts whose keys
//             and values were written. Those of rejected drafts stay past it in the blocks; the
//             next catch-up writes over them before anything reads them (attention reads only
//             earlier positions), so nothing is copied or freed on a rejection.
//   release   the sequence's blocks go back to the draft's pool.
//
// Blocks are taken as a sequence grows. The pool holds as many tokens as the decoder's, and a
// sequence never stores more positions in the draft than in the target, so it does not run out
// while the decoder does not; if it did, the sequence would draft nothing until blocks freed.
//
// With a confidence head (model/confidence_head.hpp) a sequence stops drafting at the first draft
// whose cumulative predicted acceptance falls below the head's threshold: that draft is dropped
// before it is fed, so neither the draft nor the target spends a forward row on what follows. Nor
// does it compute a next draft once the cumulative prediction of those kept falls below the
// head's continue_threshold. Both are the head's thresholds for the step's batch: the number of
// sequences asking for drafts (confidence_head::rule).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "kvcache/block_pool.hpp"
#include "model/confidence_head.hpp"
#include "model/draft_source.hpp"
#include "model/loaded_model.hpp"
#include "model/step_batch.hpp"
#include "model/workspace.hpp"

namespace brigade::model {

class transformer;

class draft_model final : public draft_source {
 public:
  /// `weights` from load(); its forward pass runs on the device it was loaded onto. With a `head`,
  /// drafting stops where the head would not verify (see above).
  draft_model(std::shared_ptr<const loaded_model> weights, const draft_source_limits& limits,
              std::shared_ptr<const confidence_head> head = nullptr);
  ~draft_model() override;
  draft_model(const draft_model&) = delete;
  draft_model& operator=(const draft_model&) = delete;

  void propose(const std::vector<draft_sequence>& sequences,
               std::vector<draft_proposal>& out) override;
  void accepted(int64_t id, int kept) override;
  void release(int64_t id) override;
  void prefilled(const std::vector<draft_context>& contexts) override;
  std::string weight_format_name() const override { return weight_format_of(*weights_); }

  /// Sequences with state here.
  int sequences() const { return static_cast<int>(seqs_.size()); }
  /// Positions of sequence `id` whose keys and values the draft holds (0 when it has none).
  int stored_tokens(int64_t id) const;
  int free_kv_blocks() const { return pool_.free_blocks(); }

  /// How the draft's weights are held where `dev` is a CPU: `int8`, quantized to int8 and
  /// multiplied with int8 dot products (gpu::make_int8_cpu_backend), its keys and values in bf16:
  /// a forward costs about a fifth less, and the drafts differ a little from the checkpoint's
  /// own. Used where the CPU has AVX512-VNNI, else as stored; BRIGADE_DRAFT_INT8=0 holds every
  /// draft as stored. `as_stored`: the checkpoint's dtype and f32 keys and values, exact. A
  /// device always holds them as stored. Either way verification decides every token.
  enum class weight_format { int8, as_stored };

  /// Loads the draft checkpoint in `dir` onto `dev` for the target whose config is `target`,
  /// loaded from `target_dir`. Refuses, naming both, a directory that does not exist, a mixture
  /// of experts, a vocabulary of another size, and a tokenizer whose tokens differ; and a
  /// malformed draft_settings.json (model/draft_settings.hpp), naming it.
  /// "int8" for a draft load() put on its int8 backend, else "as_stored".
  static std::string weight_format_of(const loaded_model& draft) {
    return draft.own_device ? "int8" : "as_stored";
  }

  /// `draft` as a draft model runs it with `attention_window`: each row attends to at most the
  /// last `attention_window` positions (0: all), or the checkpoint's own sliding window where
  /// that is shorter.
  static model_config windowed(model_config draft, int attention_window);
  /// The attention window `draft` drafts with under `options`: their draft_attention_window, or
  /// where that is unset (-1) the draft's own (its draft_settings.json).
  static int attention_window_for(const speculation_options& options, const loaded_model& draft);
  int attention_window() const override { return config_.sliding_window; }

  static result<std::shared_ptr<const loaded_model>> load(const std::string& dir,
                                                          const model_config& target,
                                                          const std::string& target_dir,
                                                          gpu::backend& dev,
                                                          weight_format held = weight_format::int8);

 private:
  struct sequence {
    std::vector<int32_t> blocks;
    int stored = 0;      // positions whose keys and values are in the blocks
    int fed_drafts = 0;  // drafts of the last proposal whose keys and values were written
  };
  // Tokens of one sequence to feed at consecutive positions.
  struct feed {
    size_t slot = 0;  // the sequence's index in the proposal
    const int32_t* tokens = nullptr;
    int count = 0;
    int start = 0;
    bool drafts = true;  // its last token's row gives a draft (false: a catch-up chunk only)
  };
  // Runs `feeds` through the model, as many tokens per forward as the workspace holds, and
  // appends to out[slot] the greedy token after each drafting feed's last token.
  void run(std::vector<feed> feeds, std::vector<draft_proposal>& out);
  // Makes room for `positions` positions of `s`; false when the pool is out of blocks.
  bool reserve(sequence& s, int positions);
  void choose(const float* row, size_t slot, int position, std::vector<draft_proposal>& out);

  std::shared_ptr<const loaded_model> weights_;
  model_config config_;                          // the draft's, with the attention window
  std::unique_ptr<transformer> forward_;         // weights_'s layers under config_
  std::shared_ptr<const confidence_head> head_;  // null: every draft up to the limit
  int catch_up_tokens_ = 0;                      // draft_source_limits::catch_up_tokens
  int block_tokens_;
  std::unique_ptr<gpu::kv_storage> kv_;
  kvcache::block_pool pool_;
  workspace ws_;
  step_batch batch_;
  std::vector<float> logits_;
  std::map<int64_t, sequence> seqs_;
  std::vector<sequence*> in_step_;    // per slot of the current proposal; null: drafts nothing
  std::vector<double> confidence_;    // per slot: the head's cumulative prediction so far
  confidence_head::batch_rule rule_;  // the head's thresholds for this step's batch
};

}  // namespace brigade::model

// The single-process engine: continuous batching over one loaded model, all experts local.
//
// It is the reference that every distributed topology must reproduce token for token, the engine
// behind `brigade generate`, and the baseline of the benchmarks.
//
// Sequence lifecycle:
//
//   submit --> waiting --(KV blocks reserved)--> prefilling --(last prompt chunk)--> decoding
//                                                                                       |
//                            finished <--(stop token | max tokens | context full)-------+
//
// cancel() removes a waiting or running sequence at once (its KV blocks return to the pool);
// release() forgets a finished one. A server calls one of them for every request it submits, so
// the engine holds only live sequences.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "kvcache/block_pool.hpp"
#include "model/confidence_head.hpp"
#include "model/draft_source.hpp"
#include "model/finish_rules.hpp"
#include "model/loaded_model.hpp"
#include "model/sampler.hpp"
#include "model/speculation.hpp"
#include "model/speculation_gate.hpp"
#include "model/step_batch.hpp"
#include "model/workspace.hpp"

namespace brigade::model {

struct engine_options {
  int block_tokens = 16;  ///< Tokens per KV block.
  int kv_tokens = 32768;  ///< KV capacity in tokens (rounded up to whole blocks).
  /// The KV cache's element type: f32 (exact, the default) or bf16 (half the KV memory and
  /// attention reads; the logits move within the tolerance docs/kvcache.md states).
  gpu::dtype kv_dtype = gpu::dtype::f32;
  int max_step_tokens = 256;  ///< Token budget of one step (decode tokens + prefill chunks).
  int max_running = 32;       ///< Sequences decoding at once.
  /// Drafts verified in the decode steps, by prompt lookup or a draft model; off unless
  /// max_draft > 0. The output is the same either way (model/speculation.hpp).
  speculation_options speculation;
  /// The draft model's weights when speculation.draft is model (draft_model::load for this
  /// engine's model, on its device).
  std::shared_ptr<const loaded_model> draft_weights;
  /// With a draft model: verify only the drafts this head trusts (model/confidence_head.hpp).
  /// It replaces the adaptive window: every sequence may draft up to max_draft each step.
  std::shared_ptr<const model::confidence_head> confidence_head;
  /// Called after every decode step of a sequence with what its source proposed (no tokens when
  /// it drafted nothing) and how many of the drafts the target kept; for benchmarks and fitting.
  std::function<void(const draft_proposal& proposal, int kept)> on_verified;
  /// The measured gate's state (speculation.measured_gate), when it should outlive this engine:
  /// what it learned of the pair and the machine then carries over (a benchmark's runs). Null:
  /// the engine keeps its own.
  std::shared_ptr<speculation_gate> gate;
};

struct request_options {
  int max_tokens = 16;
  sampling_params sampling;
  std::vector<int32_t> stop_ids;  ///< Generation ends after producing one of these.
  bool keep_logits = false;       ///< Record the logits row each token was chosen from.
  /// Log-probabilities with each token (model/logprobs.hpp): -1 none; 0 the chosen token's;
  /// n also the n likeliest.
  int top_logprobs = -1;
  /// Log-probabilities of the prompt's tokens after the first (position_logprobs, raw
  /// log-softmax: see append_prompt_logprobs): -1 none; n also the n likeliest. They cost a
  /// logits row per prompt token, so only requests that ask compute them.
  int prompt_logprobs = -1;
};

/// One generated token, as step() reports it.
struct token_event {
  int64_t request = 0;
  int32_t token = 0;
  finish_reason finished = finish_reason::none;
  position_logprobs logprobs;  ///< When the request asked for them.
  /// With the first token of a request that asked for them: one per prompt token after the first.
  std::vector<position_logprobs> prompt_logprobs;
};

class engine {
 public:
  engine(const loaded_model& model, gpu::backend& dev, const engine_options& options);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Queues a request; fails if the prompt is empty, has ids outside the vocabulary, or cannot
  /// fit the context or the KV capacity.
  result<int64_t> submit(std::vector<int32_t> prompt, const request_options& options);
  /// Runs one step; appends the tokens it produced. Returns false when there was nothing to do.
  bool step(std::vector<token_event>& events);
  /// Runs until every submitted request finished.
  void run_until_idle();
  /// Drops a waiting or running request and frees its KV blocks; not_found when it is neither.
  status cancel(int64_t request);
  /// Forgets a finished request's output; not_found when it is not finished.
  status release(int64_t request);

  /// Tokens generated so far for a request, and the logits rows when keep_logits was set.
  const std::vector<int32_t>& output(int64_t request) const;
  const std::vector<float>& kept_logits(int64_t request) const;
  finish_reason finished(int64_t request) const;

  const model_config& config() const { return model_.config; }
  int running() const;
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int free_kv_blocks() const { return pool_.free_blocks(); }
  /// Bytes of the KV storage (halved by a bf16 kv_dtype).
  size_t kv_bytes() const { return kv_->bytes(); }
  const speculation_stats& speculation() const { return speculation_; }

 private:
  struct sequence;
  void admit_waiting();
  void build_batch(std::vector<sequence*>& in_batch, std::vector<int>& fed);
  int add_decoding(std::vector<sequence*>& in_batch, std::vector<int>& fed);
  void retire(sequence& s);
  void follow_prefills(const std::vector<sequence*>& in_batch);
  void finish_step(const std::vector<sequence*>& in_batch, std::vector<token_event>& events);
  void append_token(sequence& s, int32_t token, const float* row, position_logprobs logprobs,
                    std::vector<token_event>& events);
  int blocks_for(int tokens) const;
  int draft_limit(sequence& s, int budget) const;

  const loaded_model& model_;
  engine_options options_;
  std::unique_ptr<gpu::kv_storage> kv_;
  kvcache::block_pool pool_;
  workspace ws_;
  step_batch batch_;
  std::vector<float> logits_;
  std::unique_ptr<draft_source> drafts_;  // null while speculation is off
  // The step's decoding sequences' drafts, first in the batch and in its order.
  std::vector<draft_proposal> proposals_;
  std::vector<int32_t> feed_;  // a decoding sequence's last token and drafts, while batched
  std::vector<draft_context> prefilled_;  // the step's prompt chunks, for the draft source
  speculation_stats speculation_;
  std::shared_ptr<speculation_gate> gate_;  // null: every step may draft
  int decoded_tokens_ = 0;                  // tokens the step's decoding sequences produced
  bool mixed_step_ = false;                 // the step carried prefill rows beside decoding ones
  int64_t next_id_ = 1;
  std::deque<std::unique_ptr<sequence>> waiting_;
  std::vector<std::unique_ptr<sequence>> active_;
  std::vector<std::unique_ptr<sequence>> done_;
};

}  // namespace brigade::model

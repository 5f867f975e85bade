// `brigade bench speculation` on a trained target and draft pair (models/default): single-stream
// greedy decoding with plain decoding, prompt lookup, the draft model with a fixed and an
// adaptive window, and the draft model with its confidence head (model/confidence_head.hpp);
// then plain beside the head at higher concurrency, ungated and with the utility gate as served
// (speculation_options::disable_above_batch), and a sweep over batches of plain against the head
// that finds where speculation stops paying. With --record-events it instead records the
// draft's verified steps on the fitting half of the held-out text, for
// scripts/fit_confidence_head.py; with --tune-head it picks the head's thresholds for each batch
// by decoding the fitting half with each candidate (model/confidence_head.hpp, by_batch).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"
#include "model/speculation.hpp"

namespace brigade::model {
class engine;
struct request_options;
}  // namespace brigade::model

namespace brigade::bench {

struct pair_options {
  std::string dir;            ///< Holds target/, draft/ and heldout.txt.
  std::string head_path;      ///< The head's JSON; empty: draft/confidence_head.json if present.
  std::string record_events;  ///< When set, only record the fitting events there (JSON lines).
  /// When set, only tune the head's thresholds batch by batch (sweep_batches) on the fitting
  /// prompts, measured in the decode loop, and write the head with them there.
  std::string tune_head;
  int rounds = 1;   ///< Passes over the prompts, every configuration once per prompt.
  int prompts = 8;  ///< Single-stream prompts, from the evaluation half.
  int prompt_tokens = 64;
  int max_tokens = 64;
  int max_draft = 5;
  /// speculation_options::draft_attention_window of every draft-model row (-1: the draft's own).
  int draft_attention_window = -1;
  std::vector<int> concurrency{8};  ///< Sequences decoding together in the throughput rows.
  /// disable_above_batch of the gated throughput rows; -1: what `brigade serve` runs with (the
  /// embedded default manifest's).
  int gate = -1;
  /// Batches of the sweep of plain decoding against the draft model with its head, which finds
  /// the largest batch where speculation still pays; empty skips it.
  std::vector<int> sweep_batches{1, 2, 4, 8, 16, 32, 64};
  /// Also the single-user requests through the actor topology, as `brigade serve` runs them
  /// (bench/speculation_served.hpp).
  bool served = true;
};

/// Runs the pair benchmark; fills `out` (rows, acceptance per position, calibration, verify
/// costs, the gate's rows, the sweep) and `text` (the tables), or records events when
/// options.record_events is set.
status run_pair_bench(const pair_options& options, gpu::backend& dev, nlohmann::json& out,
                      std::string& text);

/// Submits `prompts` with `req` and steps `eng` until every one has its first token, so that
/// the timed steps after it are decode steps only; returns the request ids in prompt order.
std::vector<int64_t> start_all(model::engine& eng, const std::vector<std::vector<int32_t>>& prompts,
                               const model::request_options& req);

/// Seconds of one forward step in which each of `batch` sequences, `context` tokens long, feeds
/// 1 + drafts tokens and gets a logits row for each: the cost of a verify step (median of `reps`).
/// The tokens are random and the same step repeats, unless `text` is given: then each repetition
/// feeds another window of it, routing to the experts text routes to, anew each time, as the
/// steps of a decode loop do (a repeated step finds its experts in the cache the last one left).
/// With `attention_window`, each row attends to that many positions at most (a draft model's
/// forward as draft_model runs it).
double verify_step_seconds(const model::loaded_model& m, gpu::backend& dev, int batch, int context,
                           int drafts, int reps, const std::vector<int32_t>* text = nullptr,
                           int attention_window = 0);

/// A draft model's forwards as a decode step runs them at batch 1, after a verify step of
/// `drafts` drafts on `target` (medians of `reps` steps): the first (its weights no longer in the
/// cache the target's step went through), and the mean of the `drafts - 1` after it.
struct draft_forward_seconds {
  double first = 0;
  double next = 0;
};
draft_forward_seconds draft_forwards_after_target(const model::loaded_model& target,
                                                  const model::loaded_model& draft,
                                                  gpu::backend& dev, int context, int drafts,
                                                  int reps, int draft_attention_window = 0);

}  // namespace brigade::bench

// The tokens one forward step processes, flattened across sequences.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/backend.hpp"

namespace brigade::model {

/// A step: for each sequence some new tokens at consecutive positions (a prefill chunk, one
/// decode token, or several tokens to verify), with the block table that holds its KV.
class step_batch {
 public:
  /// Adds `count` tokens of one sequence starting at `start_position`. Its block table must
  /// cover positions [0, start_position + count). Logits are produced for the last
  /// `logits_rows` of the new tokens (0 for none, e.g. a prefill chunk that is not the last).
  void add_sequence(const int32_t* tokens, int count, int start_position, const int32_t* blocks,
                    int block_count, int logits_rows);
  void clear();

  int tokens() const { return static_cast<int>(token_ids_.size()); }
  int sequences() const { return static_cast<int>(block_offsets_.size()) - 1; }
  const int32_t* token_ids() const { return token_ids_.data(); }
  const int32_t* positions() const { return positions_.data(); }
  /// Token indices (into this batch) whose logits the step returns, in order.
  const std::vector<int32_t>& logit_rows() const { return logit_rows_; }
  /// The first logit row of each sequence in logit_rows(), and how many it has.
  int logits_begin(int seq) const { return logits_begin_[static_cast<size_t>(seq)]; }
  int logits_count(int seq) const {
    return logits_begin_[static_cast<size_t>(seq) + 1] - logits_begin_[static_cast<size_t>(seq)];
  }
  /// The metadata attention kernels need; valid while this batch is unchanged.
  gpu::attention_batch attention() const;

 private:
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> token_seq_;
  std::vector<int32_t> block_offsets_{0};
  std::vector<int32_t> block_ids_;
  std::vector<int32_t> logit_rows_;
  std::vector<int32_t> logits_begin_{0};
};

}  // namespace brigade::model

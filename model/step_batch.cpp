#include "model/step_batch.hpp"

namespace brigade::model {

void step_batch::add_sequence(const int32_t* tokens, int count, int start_position,
                              const int32_t* blocks, int block_count, int logits_rows) {
  const int seq = sequences();
  const int first = this->tokens();
  for (int i = 0; i < count; ++i) {
    token_ids_.push_back(tokens[i]);
    positions_.push_back(start_position + i);
    token_seq_.push_back(seq);
  }
  block_ids_.insert(block_ids_.end(), blocks, blocks + block_count);
  block_offsets_.push_back(static_cast<int32_t>(block_ids_.size()));
  for (int i = count - logits_rows; i < count; ++i)
    logit_rows_.push_back(first + i);
  logits_begin_.push_back(static_cast<int32_t>(logit_rows_.size()));
}

void step_batch::clear() {
  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  block_offsets_.assign(1, 0);
  block_ids_.clear();
  logit_rows_.clear();
  logits_begin_.assign(1, 0);
}

gpu::attention_batch step_batch::attention() const {
  gpu::attention_batch a;
  a.positions = positions_.data();
  a.token_seq = token_seq_.data();
  a.block_offsets = block_offsets_.data();
  a.block_ids = block_ids_.data();
  a.tokens = tokens();
  a.seqs = sequences();
  return a;
}

}  // namespace brigade::model

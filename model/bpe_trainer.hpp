// A small, deterministic byte-level BPE trainer, for the tokenizers of generated checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/bpe.hpp"

namespace brigade::model {

class bpe_trainer {
 public:
  /// Counts one occurrence of a pre-tokenized word, given as raw bytes.
  void add_word(std::string_view word);

  /// Learns merges until `new_tokens` tokens beyond the 256 bytes exist or no pair is left.
  /// Each step merges the most frequent adjacent pair; ties go to the pair with the smaller
  /// ids, so the result depends on the words alone. Returns the merges in rank order, written
  /// in byte-level characters.
  std::vector<bpe::merge_pair> train(std::size_t new_tokens) const;

 private:
  std::map<std::string, int64_t> word_counts_;
};

}  // namespace brigade::model

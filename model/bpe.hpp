// The byte-level BPE model: a vocabulary, ranked merges and the merge loop that turns one
// pre-tokenized word into token ids.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class bpe {
 public:
  /// One merge as written in tokenizer.json: the two tokens whose concatenation it forms.
  using merge_pair = std::pair<std::string, std::string>;

  /// Checks that every merge names tokens of `vocab` and forms one, and that all 256 byte
  /// tokens exist. Error messages name the offending model.vocab or model.merges entry.
  static result<bpe> create(std::vector<std::pair<std::string, int32_t>> vocab,
                            const std::vector<merge_pair>& merges, bool ignore_merges);

  bpe(bpe&&) noexcept;
  bpe& operator=(bpe&&) noexcept;
  ~bpe();

  /// Appends the ids of `word`, given as raw bytes (the byte-level mapping happens inside).
  /// Thread-safe: the per-word cache is shared under a lock.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// The token text of `id` in byte-level characters, or nullptr for an id the vocabulary lacks.
  const std::string* token_of(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view token) const;
  /// Highest vocabulary id + 1.
  int32_t id_limit() const;

 private:
  struct state;
  explicit bpe(std::unique_ptr<state> s);
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  std::unique_ptr<state> s_;
};

}  // namespace brigade::model

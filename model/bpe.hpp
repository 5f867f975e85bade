// The BPE model: a vocabulary, ranked merges and the merge loop that turns one pre-tokenized
// word into token ids. Byte-level vocabularies (GPT-2, Qwen, DeepSeek) start a word from its
// bytes; SentencePiece-style ones (Llama, Mistral) from its characters, with <0xNN> byte
// tokens or the unknown token for characters the vocabulary lacks.
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

  /// The model's fields besides vocab and merges (tokenizer.json "model").
  struct options {
    /// Words are bytes written in byte-level characters (the pre-tokenizer has ByteLevel).
    bool byte_level = true;
    /// A character without a token becomes the <0xNN> tokens of its UTF-8 bytes when all
    /// of them exist (byte_fallback).
    bool byte_fallback = false;
    /// The token for characters that have neither a token nor byte tokens; without one they
    /// are dropped, as the Hugging Face library drops them.
    std::string unk_token;
    /// Consecutive unknown characters become one unknown token (fuse_unk).
    bool fuse_unk = false;
    /// A word that is itself in the vocabulary is that token, merges or not (ignore_merges).
    bool ignore_merges = false;
  };

  /// Checks that every merge names tokens of `vocab` and forms one, that a byte-level
  /// vocabulary has all 256 byte tokens and that unk_token is in it. Error messages name the
  /// offending model.vocab, model.merges or model.unk_token entry.
  static result<bpe> create(std::vector<std::pair<std::string, int32_t>> vocab,
                            const std::vector<merge_pair>& merges, const options& opts);

  bpe(bpe&&) noexcept;
  bpe& operator=(bpe&&) noexcept;
  ~bpe();

  /// Appends the ids of `word`: raw bytes for a byte-level model (the byte-level mapping happens
  /// inside), else valid UTF-8. Thread-safe: the per-word cache is shared under a lock.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// The token text of `id` as the vocabulary writes it, or nullptr for an id it lacks.
  const std::string* token_of(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view token) const;
  /// Highest vocabulary id + 1.
  int32_t id_limit() const;

 private:
  struct state;
  explicit bpe(std::unique_ptr<state> s);
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  std::unique_ptr<state> s_;
};

}  // namespace brigade::model

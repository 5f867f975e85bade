// A Hugging Face tokenizer.json, as real checkpoints ship it: byte-level BPE (Qwen, DeepSeek,
// OLMoE) or SentencePiece-style BPE with byte fallback (Llama, Mistral, Mixtral), with added and
// special tokens, normalizers, pre-tokenizers, decoders and a post-processor template. What is
// supported and refused: docs/tokenizer.md.
//
//   encode: text -> raw added tokens split out -> normalizer -> normalized added tokens split
//           out -> pre-tokenizer -> BPE per piece [-> post-processor template]
//   decode: ids -> token strings (special ones dropped if asked) -> decoder steps -> text
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class tokenizer {
 public:
  /// Loads DIR/tokenizer.json, and DIR/tokenizer_config.json when present (bos/eos tokens).
  static result<tokenizer> load(const std::string& dir);
  /// Loads a tokenizer.json file, with an optional tokenizer_config.json path ("" for none).
  static result<tokenizer> load_files(const std::string& tokenizer_json,
                                      const std::string& tokenizer_config_json);

  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;
  ~tokenizer();

  /// Token ids of `text`. Added tokens written literally in the text (e.g. "<|im_start|>") are
  /// recognised and map to their ids, as the Hugging Face tokenizers library does. No BOS/EOS
  /// is added (add_special_tokens=False): chat templates write them. Invalid UTF-8 in `text` is
  /// read as U+FFFD. Thread-safe.
  std::vector<int32_t> encode(std::string_view text) const;
  /// As encode(text), and with `add_special_tokens` the post-processor's template puts its
  /// special tokens around the ids (Mistral's "<s>"), as the Hugging Face library's
  /// encode(text, add_special_tokens=True) does.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  /// Text of `ids`; special added tokens are dropped when skip_special is true. Ids outside the
  /// vocabulary are skipped, and bytes that do not form UTF-8 become U+FFFD.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  /// Number of ids: the base vocabulary plus added tokens (highest id + 1).
  int32_t size() const;
  /// The id of a token written as it appears in the vocabulary or added tokens.
  std::optional<int32_t> token_id(std::string_view token) const;
  /// The token `id` stands for as the vocabulary writes it ("Ġworld", "▁world", "<0x0A>"), or
  /// an added token's content; nullopt for an id that is neither.
  std::optional<std::string> token_text(int32_t id) const;
  /// True for added tokens marked special.
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  struct impl;
  explicit tokenizer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
  friend class incremental_decoder;
};

/// Streaming decode: yields text only once it is final, so that a character split over several
/// byte tokens is never emitted in halves and every decoder step (Strip, Metaspace, ByteFallback)
/// acts as it does on the whole output. The pieces joined equal decode() of all ids, except
/// after more than kMaxPendingTokens ids that keep the text's end unfinished.
///
/// It keeps a small window of ids: those already emitted since the last emission (context, so
/// that the first token of the window is not decoded as the first of the text) and those still
/// pending; each push decodes the window and emits what the context's text does not cover.
class incremental_decoder {
 public:
  /// Pending ids past this bound are emitted even when their text ends unfinished.
  static constexpr std::size_t kMaxPendingTokens = 32;

  explicit incremental_decoder(const tokenizer& tok, bool skip_special = true);
  /// Text that became final with this token (possibly empty).
  std::string push(int32_t id);
  /// Whatever is still pending, with incomplete bytes replaced by U+FFFD.
  std::string finish();

 private:
  std::string emit_from(std::string text);

  const tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> window_;  ///< Context ids, then pending ids.
  std::size_t context_ = 0;      ///< How many ids of window_ are context.
  std::string context_text_;     ///< The decoded text of the context ids.
};

}  // namespace brigade::model

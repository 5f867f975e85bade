// Hugging Face tokenizer.json: byte-level BPE with added/special tokens and a regex pre-tokenizer.
#pragma once

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
  /// Text of `ids`; special added tokens are dropped when skip_special is true. Ids outside the
  /// vocabulary are skipped, and bytes that do not form UTF-8 become U+FFFD.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  /// Number of ids: the base vocabulary plus added tokens (highest id + 1).
  int32_t size() const;
  /// The id of a token written as it appears in the vocabulary or added tokens.
  std::optional<int32_t> token_id(std::string_view token) const;
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

/// Streaming decode: yields text only once the bytes of the tokens seen so far form complete
/// UTF-8 characters, so a multi-byte character split over two tokens is never emitted in halves.
class incremental_decoder {
 public:
  explicit incremental_decoder(const tokenizer& tok, bool skip_special = true);
  /// Text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  /// Whatever is still pending, with incomplete bytes replaced by U+FFFD.
  std::string finish();

 private:
  const tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace brigade::model

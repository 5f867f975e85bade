// The pre-tokenizer: splits normalized text into the words that BPE merges within.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

/// The GPT-2 word pattern, which ByteLevel with use_regex applies.
extern const char* const kGpt2SplitPattern;
/// The Qwen2/Qwen3 word pattern (digits one at a time, CJK and letters in runs).
extern const char* const kQwenSplitPattern;

class pre_tokenizer {
 public:
  /// What a Split step keeps of the text around each match.
  enum class split_behavior { isolated, removed };

  /// An identity pre-tokenizer; add steps to it in order.
  pre_tokenizer();
  pre_tokenizer(pre_tokenizer&&) noexcept;
  pre_tokenizer& operator=(pre_tokenizer&&) noexcept;
  ~pre_tokenizer();

  /// A Split step on a regular expression (PCRE2, UTF and Unicode properties on). `invert`
  /// keeps the text between matches as the pieces instead.
  status add_split_regex(const std::string& pattern, split_behavior behavior, bool invert);
  /// A Split step on a literal string.
  status add_split_literal(const std::string& literal, split_behavior behavior, bool invert);
  /// A ByteLevel step: an optional leading space per piece, then the GPT-2 split if use_regex.
  /// The byte-to-character mapping itself is left to the BPE model.
  status add_byte_level(bool add_prefix_space, bool use_regex);

  /// Appends the pieces of `text`, which must be valid UTF-8. Thread-safe.
  void split(std::string_view text, std::vector<std::string>& pieces) const;

 private:
  struct step;
  std::vector<std::unique_ptr<step>> steps_;
};

}  // namespace brigade::model

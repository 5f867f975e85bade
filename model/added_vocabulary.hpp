// Added tokens (tokenizer.json "added_tokens"): strings matched whole in the input before any
// normalization or pre-tokenization, such as "<|im_start|>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::model {

struct added_token {
  int32_t id = 0;
  std::string content;
  bool special = false;      ///< Dropped by decode(skip_special).
  bool lstrip = false;       ///< A match also swallows the whitespace before it.
  bool rstrip = false;       ///< A match also swallows the whitespace after it.
  bool single_word = false;  ///< Matches only when not inside a word.
  bool normalized = false;   ///< Matched in normalized text rather than raw text.
};

class added_vocabulary {
 public:
  /// One piece of a split: a run of ordinary text, or an added token (text empty).
  struct segment {
    std::string_view text;
    int32_t id = -1;  ///< -1 for ordinary text.
  };

  void add(added_token token);
  const std::vector<added_token>& tokens() const { return tokens_; }
  const added_token* find_id(int32_t id) const;
  const added_token* find_content(std::string_view content) const;

  /// Splits `text` (valid UTF-8) on the tokens whose `normalized` flag equals the argument,
  /// longest match first at the leftmost position, honouring lstrip, rstrip and single_word.
  void split(std::string_view text, bool normalized, std::vector<segment>& out) const;

 private:
  const added_token* longest_match(std::string_view text, std::size_t pos, bool normalized) const;

  std::vector<added_token> tokens_;
  /// Indices into tokens_ by the first byte of their content, longest content first: the
  /// scan only looks further at positions whose byte starts some token.
  std::vector<int32_t> by_first_byte_[256];
};

}  // namespace brigade::model

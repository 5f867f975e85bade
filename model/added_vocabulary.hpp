// Added tokens (tokenizer.json "added_tokens"): strings matched whole in the input before any
// pre-tokenization, such as "<|im_start|>". Tokens marked `normalized` are matched in the
// normalized text, the others in the raw text, as the Hugging Face library matches them.
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
  bool single_word = false;  ///< Matches only with no word character (\w) right beside it.
  bool normalized = false;   ///< Matched in normalized text rather than raw text.
};

class added_vocabulary {
 public:
  /// One piece of a split: a run of ordinary text, or an added token (text empty).
  struct segment {
    std::string_view text;
    int32_t id = -1;  ///< -1 for ordinary text.
  };

  /// Adds `token`, matched as `pattern`: its content, or for a `normalized` token its content
  /// as the normalizer writes it.
  void add(added_token token, std::string pattern);
  const std::vector<added_token>& tokens() const { return tokens_; }
  const added_token* find_id(int32_t id) const;
  const added_token* find_content(std::string_view content) const;

  /// Splits `text` (valid UTF-8) on the tokens whose `normalized` flag equals the argument:
  /// leftmost match first, the longest there, each search going on after the previous match,
  /// honouring lstrip, rstrip and single_word.
  void split(std::string_view text, bool normalized, std::vector<segment>& out) const;

 private:
  /// The index of the longest token matching at `pos`, or -1.
  int32_t longest_match(std::string_view text, std::size_t pos, bool normalized) const;

  std::vector<added_token> tokens_;
  std::vector<std::string> patterns_;  ///< What each token of tokens_ is matched as.
  /// Indices into tokens_ by the first byte of their pattern, longest pattern first: the scan
  /// only looks further at positions whose byte starts some token.
  std::vector<int32_t> by_first_byte_[256];
};

}  // namespace brigade::model

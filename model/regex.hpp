// The patterns of a tokenizer.json (Split pre-tokenizers, Replace normalizers and decoders):
// PCRE2 regular expressions with Unicode properties, or literal strings, matched left to right.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class regex {
 public:
  /// One match: the byte offsets [first, second) in the subject.
  using span = std::pair<std::size_t, std::size_t>;

  /// Compiles `pattern` with UTF and Unicode properties on (\p{L}, \p{N}, \p{P}, and \s as
  /// Unicode whitespace), as the Hugging Face library's Oniguruma patterns behave. The error
  /// names the pattern and the offset where it fails.
  static result<regex> compile(const std::string& pattern);
  /// A pattern that matches `text` exactly; empty text is an error.
  static result<regex> literal(const std::string& text);

  regex(regex&&) noexcept;
  regex& operator=(regex&&) noexcept;
  ~regex();

  /// Appends the non-empty, non-overlapping matches in `subject` (valid UTF-8), leftmost first.
  /// An empty match is skipped and the search moves on by one character. Thread-safe.
  void find_all(std::string_view subject, std::vector<span>& out) const;
  /// `subject` with every match (as find_all finds them) replaced by `content`.
  std::string replace_all(std::string_view subject, std::string_view content) const;

 private:
  struct compiled;
  regex();
  std::unique_ptr<compiled> compiled_;
  std::string literal_;
};

}  // namespace brigade::model

// The text normalizer of a tokenizer.json: Unicode normalization forms, Prepend and Replace,
// applied in order (a "Sequence" is flattened into this list).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class normalizer {
 public:
  enum class form { nfc, nfd, nfkc, nfkd };

  /// The identity normalizer (tokenizer.json's "normalizer": null); add steps in order.
  normalizer();
  normalizer(normalizer&&) noexcept;
  normalizer& operator=(normalizer&&) noexcept;
  ~normalizer();

  void add(form f);
  /// Prepend: `prefix` goes in front of any text that is not empty (Llama's "▁").
  void add_prepend(std::string prefix);
  /// Replace: every match of `pattern` (a regex when `is_regex`, else a literal string) becomes
  /// `content`. The error names the pattern when it does not compile or is empty.
  status add_replace(const std::string& pattern, bool is_regex, std::string content);
  bool is_identity() const { return steps_.empty(); }

  /// `text` (valid UTF-8) with each step applied in turn.
  std::string apply(std::string_view text) const;

 private:
  struct step;
  std::vector<std::unique_ptr<step>> steps_;
};

}  // namespace brigade::model

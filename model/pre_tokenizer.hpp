// The pre-tokenizer: splits normalized text into the words that BPE merges within. Its steps
// are those of a tokenizer.json "pre_tokenizer" (a "Sequence" is flattened into this list).
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
  /// What a Split step does with each match, as the Hugging Face library names it: keep it as
  /// its own piece, drop it, join it to the piece before or after, or join adjacent matches.
  enum class split_behavior {
    isolated,
    removed,
    merged_with_previous,
    merged_with_next,
    contiguous
  };
  /// When Metaspace puts its replacement character in front of a piece: always, only for the
  /// piece that starts the input ("first"), or never.
  enum class prepend_scheme { always, first, never };

  /// An identity pre-tokenizer; add steps to it in order.
  pre_tokenizer();
  pre_tokenizer(pre_tokenizer&&) noexcept;
  pre_tokenizer& operator=(pre_tokenizer&&) noexcept;
  ~pre_tokenizer();

  /// A Split step on a regular expression (see regex.hpp). `invert` makes the text between
  /// matches count as the matches.
  status add_split_regex(const std::string& pattern, split_behavior behavior, bool invert);
  /// A Split step on a literal string.
  status add_split_literal(const std::string& literal, split_behavior behavior, bool invert);
  /// A ByteLevel step: an optional leading space per piece, then the GPT-2 split if use_regex.
  /// The byte-to-character mapping itself is left to the BPE model.
  status add_byte_level(bool add_prefix_space, bool use_regex);
  /// A Metaspace step: every space becomes `replacement` (one character), which is also put in
  /// front of a piece that lacks it as `scheme` says; with `split`, each replacement then
  /// starts a new piece.
  status add_metaspace(const std::string& replacement, prepend_scheme scheme, bool split);

  /// True once a ByteLevel step is added: the BPE model then works on bytes.
  bool has_byte_level() const;

  /// Appends the pieces of `text`, which must be valid UTF-8. `at_start` says that `text`
  /// begins the input (Metaspace's "first" scheme prepends only there). Thread-safe.
  void split(std::string_view text, std::vector<std::string>& pieces, bool at_start = true) const;

 private:
  struct step;
  std::vector<std::unique_ptr<step>> steps_;
};

}  // namespace brigade::model

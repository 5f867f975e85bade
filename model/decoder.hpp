// The decoder of a tokenizer.json: turns a list of token strings back into text. Its steps are
// those of the Hugging Face library ("Sequence" is flattened into this list), each mapping the
// list of strings to a new one; the result is the concatenation of the last list.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class decoder {
 public:
  /// No steps yet: decode() joins the token strings as they are.
  decoder();
  decoder(decoder&&) noexcept;
  decoder& operator=(decoder&&) noexcept;
  ~decoder();

  /// ByteLevel: each token's byte-level characters become their bytes (a token holding any
  /// other character stays as its own UTF-8), and all of them become one string, with bytes
  /// that do not form UTF-8 replaced by U+FFFD.
  void add_byte_level();
  /// Metaspace: `replacement` (one character) becomes a space; in the first token it is
  /// dropped instead when `strip_first` (any prepend_scheme but "never").
  status add_metaspace(std::string replacement, bool strip_first);
  /// Replace: in each token, every match of `pattern` (a regex when `is_regex`) becomes
  /// `content`.
  status add_replace(const std::string& pattern, bool is_regex, std::string content);
  /// ByteFallback: runs of <0xNN> tokens become the text of their bytes, or one U+FFFD per
  /// byte when those bytes are not UTF-8.
  void add_byte_fallback();
  /// Fuse: all tokens become one.
  void add_fuse();
  /// Strip: up to `start` leading and `stop` trailing `content` characters go from each token.
  void add_strip(std::string content, std::size_t start, std::size_t stop);

  /// The text of `tokens`. When `incomplete` is given, it is set if the text ends in bytes that
  /// more byte tokens could still complete into a character (streaming waits for those).
  std::string decode(std::vector<std::string> tokens, bool* incomplete = nullptr) const;

 private:
  struct step;
  std::vector<std::unique_ptr<step>> steps_;
};

}  // namespace brigade::model

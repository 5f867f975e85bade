// UTF-8 helpers for the tokenizer: validation, lossy repair and streaming boundaries.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace brigade::model::utf8 {

/// Appends the UTF-8 encoding of code point `cp` (which must be a Unicode scalar value).
void append(std::string& out, char32_t cp);

/// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool is_valid(std::string_view text);

/// `text` with every ill-formed sequence replaced by U+FFFD, one replacement per maximal
/// subpart, as Rust's String::from_utf8_lossy and the WHATWG decoder do.
std::string repair(std::string_view text);

/// Length of the longest prefix of `text` that does not end inside a sequence which more bytes
/// could still complete. Bytes past it are a truncated (but so far valid) character.
std::size_t complete_prefix_size(std::string_view text);

/// Decodes the code point starting at `text[pos]`, which must be valid UTF-8, and advances pos.
char32_t next(std::string_view text, std::size_t& pos);

}  // namespace brigade::model::utf8

// GPT-2's reversible mapping between bytes and printable Unicode characters, which byte-level
// BPE vocabularies are written in (a space is "Ġ", a newline "Ċ").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace brigade::model::byte_level {

/// The UTF-8 text of the character that stands for `byte` in a byte-level vocabulary.
std::string_view char_of(uint8_t byte);

/// `bytes` written in byte-level characters.
std::string encode(std::string_view bytes);

/// Appends the bytes that the byte-level characters of `token` stand for. Characters outside the
/// mapping are kept as their own UTF-8 (the ByteLevel decoder keeps a token holding any such
/// character whole, as the Hugging Face library does; see decoder.hpp).
void decode_append(std::string_view token, std::string& out);

/// True when every character of `token` is a byte-level character.
bool is_byte_level(std::string_view token);

}  // namespace brigade::model::byte_level

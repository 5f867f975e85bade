#include "model/byte_level.hpp"

#include <array>

#include "model/utf8.hpp"

namespace brigade::model::byte_level {
namespace {

// Printable bytes stand for themselves; the other 68 are shifted past U+00FF in byte order, so
// that no vocabulary entry contains whitespace or control characters.
bool maps_to_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct tables {
  std::array<std::string, 256> text_of_byte;
  std::array<int16_t, 512> byte_of_char{};  // Code points below 512; -1 where none.

  tables() {
    byte_of_char.fill(-1);
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = maps_to_itself(b) ? static_cast<char32_t>(b) : 256 + shifted++;
      utf8::append(text_of_byte[b], cp);
      byte_of_char[cp] = static_cast<int16_t>(b);
    }
  }
};

const tables& the_tables() {
  static const tables t;
  return t;
}

}  // namespace

std::string_view char_of(uint8_t byte) {
  return the_tables().text_of_byte[byte];
}

std::string encode(std::string_view bytes) {
  const tables& t = the_tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    out += t.text_of_byte[static_cast<uint8_t>(c)];
  return out;
}

void decode_append(std::string_view token, std::string& out) {
  const tables& t = the_tables();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const std::size_t start = pos;
    const char32_t cp = utf8::next(token, pos);
    const int b = cp < t.byte_of_char.size() ? t.byte_of_char[cp] : -1;
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(token.substr(start, pos - start));
    }
  }
}

bool is_byte_level(std::string_view token) {
  const tables& t = the_tables();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const char32_t cp = utf8::next(token, pos);
    if (cp >= t.byte_of_char.size() || t.byte_of_char[cp] < 0) return false;
  }
  return true;
}

}  // namespace brigade::model::byte_level

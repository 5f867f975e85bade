#include "model/utf8.hpp"

#include <cstdint>

namespace brigade::model::utf8 {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Length of the well-formed prefix of the sequence at text[pos]: the whole sequence when it is
// complete and valid (returned in `complete`), otherwise how many bytes form a valid but
// unfinished start. A result of 0 means text[pos] cannot start a sequence at all.
std::size_t valid_run(std::string_view text, std::size_t pos, bool& complete) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  complete = false;
  if (b0 < 0x80) {
    complete = true;
    return 1;
  }
  std::size_t need = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // Rejects overlong three-byte forms.
    if (b0 == 0xED) hi = 0x9F;  // Rejects UTF-16 surrogates.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // Rejects overlong four-byte forms.
    if (b0 == 0xF4) hi = 0x8F;  // Rejects code points past U+10FFFF.
  } else {
    return 0;
  }
  std::size_t got = 1;
  while (got < need && pos + got < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos + got]);
    const uint8_t min = got == 1 ? lo : 0x80;
    const uint8_t max = got == 1 ? hi : 0xBF;
    if (b < min || b > max) return got;
    ++got;
  }
  complete = got == need;
  return got;
}

}  // namespace

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool complete = false;
    const std::size_t n = valid_run(text, pos, complete);
    if (!complete) return false;
    pos += n;
  }
  return true;
}

std::string repair(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    bool complete = false;
    const std::size_t n = valid_run(text, pos, complete);
    if (complete) {
      out.append(text.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacement);
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

std::size_t complete_prefix_size(std::string_view text) {
  // A character is at most four bytes, so only the last three can be an unfinished start.
  const std::size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (std::size_t pos = first; pos < text.size(); ++pos) {
    const auto b = static_cast<uint8_t>(text[pos]);
    if (b < 0xC0) continue;  // ASCII or a continuation byte cannot start a sequence.
    bool complete = false;
    const std::size_t n = valid_run(text, pos, complete);
    if (!complete && n > 0 && pos + n == text.size()) return pos;
  }
  return text.size();
}

char32_t next(std::string_view text, std::size_t& pos) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  std::size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (std::size_t i = 1; i < n && pos + i < text.size(); ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  }
  pos += n;
  return cp;
}

}  // namespace brigade::model::utf8

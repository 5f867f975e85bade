#include "model/added_vocabulary.hpp"

#include <unicode/uchar.h>

#include <algorithm>

#include "model/utf8.hpp"

namespace brigade::model {
namespace {

// Rust's char::is_alphanumeric, which the Hugging Face library uses for single_word.
bool is_alphanumeric(char32_t c) {
  const auto cp = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(cp);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_whitespace(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}

// The code point that ends just before `end`.
char32_t last_char_before(std::string_view text, std::size_t end, std::size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  std::size_t pos = start;
  return utf8::next(text, pos);
}

}  // namespace

void added_vocabulary::add(added_token token) {
  if (token.content.empty()) return;
  const auto index = static_cast<int32_t>(tokens_.size());
  auto& bucket = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  tokens_.push_back(std::move(token));
  bucket.push_back(index);
  std::stable_sort(bucket.begin(), bucket.end(), [this](int32_t a, int32_t b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

const added_token* added_vocabulary::find_id(int32_t id) const {
  for (const added_token& t : tokens_) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const added_token* added_vocabulary::find_content(std::string_view content) const {
  for (const added_token& t : tokens_) {
    if (t.content == content) return &t;
  }
  return nullptr;
}

const added_token* added_vocabulary::longest_match(std::string_view text, std::size_t pos,
                                                   bool normalized) const {
  for (int32_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const added_token& t = tokens_[index];
    if (t.normalized == normalized && text.compare(pos, t.content.size(), t.content) == 0) {
      return &t;
    }
  }
  return nullptr;
}

void added_vocabulary::split(std::string_view text, bool normalized,
                             std::vector<segment>& out) const {
  std::size_t emitted = 0;  // Text before this offset is already in `out`.
  std::size_t pos = 0;
  while (pos < text.size()) {
    const added_token* t = longest_match(text, pos, normalized);
    if (t == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + t->content.size();
    pos = stop;
    if (t->single_word) {
      std::size_t unused = 0;
      const bool word_before = start > 0 && is_alphanumeric(last_char_before(text, start, unused));
      std::size_t after = stop;
      const bool word_after = stop < text.size() && is_alphanumeric(utf8::next(text, after));
      if (word_before || word_after) continue;
    }
    if (t->lstrip) {
      while (start > emitted) {
        std::size_t char_start = 0;
        if (!is_whitespace(last_char_before(text, start, char_start))) break;
        start = std::max(char_start, emitted);
      }
    }
    if (t->rstrip) {
      while (stop < text.size()) {
        std::size_t next = stop;
        if (!is_whitespace(utf8::next(text, next))) break;
        stop = next;
      }
      pos = stop;
    }
    if (emitted < start) out.push_back({text.substr(emitted, start - emitted), -1});
    out.push_back({std::string_view{}, t->id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

}  // namespace brigade::model

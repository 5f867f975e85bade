#include "model/added_vocabulary.hpp"

#include <unicode/uchar.h>

#include <algorithm>

#include "model/utf8.hpp"

namespace brigade::model {
namespace {

// Rust's regex \w, which the Hugging Face library tests single_word with: Alphabetic, marks,
// decimal digits, connector punctuation and the joiners.
bool is_word_char(char32_t c) {
  const auto cp = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  const int8_t type = u_charType(cp);
  return type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_DECIMAL_DIGIT_NUMBER ||
         type == U_CONNECTOR_PUNCTUATION;
}

// Rust's regex \s: the White_Space property.
bool is_whitespace(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}

// The code point that ends just before `end` (> 0), and where it starts.
char32_t last_char_before(std::string_view text, std::size_t end, std::size_t& start) {
  start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
    --start;
  std::size_t pos = start;
  return utf8::next(text, pos);
}

// Where the run of whitespace that ends at `end` begins.
std::size_t whitespace_start(std::string_view text, std::size_t end) {
  while (end > 0) {
    std::size_t char_start = 0;
    if (!is_whitespace(last_char_before(text, end, char_start))) break;
    end = char_start;
  }
  return end;
}

// Where the run of whitespace that starts at `start` ends.
std::size_t whitespace_end(std::string_view text, std::size_t start) {
  while (start < text.size()) {
    std::size_t next = start;
    if (!is_whitespace(utf8::next(text, next))) break;
    start = next;
  }
  return start;
}

// True when a word character touches [start, stop) on either side.
bool inside_word(std::string_view text, std::size_t start, std::size_t stop) {
  std::size_t unused = 0;
  if (start > 0 && is_word_char(last_char_before(text, start, unused))) return true;
  std::size_t after = stop;
  return stop < text.size() && is_word_char(utf8::next(text, after));
}

}  // namespace

void added_vocabulary::add(added_token token, std::string pattern) {
  if (pattern.empty()) return;
  const auto index = static_cast<int32_t>(tokens_.size());
  auto& bucket = by_first_byte_[static_cast<unsigned char>(pattern[0])];
  tokens_.push_back(std::move(token));
  patterns_.push_back(std::move(pattern));
  // Longest pattern first, earlier tokens first among equal lengths: insert after every
  // pattern at least as long (sorting the bucket on every add made loading a tokenizer with
  // thousands of added tokens quadratic).
  const std::size_t size = patterns_.back().size();
  const auto at = std::partition_point(bucket.begin(), bucket.end(), [&](int32_t other) {
    return patterns_[static_cast<std::size_t>(other)].size() >= size;
  });
  bucket.insert(at, index);
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

int32_t added_vocabulary::longest_match(std::string_view text, std::size_t pos,
                                        bool normalized) const {
  for (int32_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const std::string& p = patterns_[index];
    if (tokens_[index].normalized == normalized && text.compare(pos, p.size(), p) == 0) {
      return index;
    }
  }
  return -1;
}

// The Hugging Face library's matching: a rejected single_word match is skipped whole, and each
// search resumes where the previous match ended, even when rstrip took the whitespace after it.
void added_vocabulary::split(std::string_view text, bool normalized,
                             std::vector<segment>& out) const {
  std::size_t emitted = 0;  // Text before this offset is already in `out`.
  std::size_t pos = 0;
  while (pos < text.size()) {
    const int32_t index = longest_match(text, pos, normalized);
    if (index < 0) {
      ++pos;
      continue;
    }
    const added_token* t = &tokens_[index];
    std::size_t start = pos;
    std::size_t stop = pos + patterns_[index].size();
    pos = stop;
    if (t->single_word && inside_word(text, start, stop)) continue;
    if (t->lstrip) start = std::max(whitespace_start(text, start), emitted);
    if (t->rstrip) stop = whitespace_end(text, stop);
    if (emitted < start) out.push_back({text.substr(emitted, start - emitted), -1});
    out.push_back({std::string_view{}, t->id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

}  // namespace brigade::model

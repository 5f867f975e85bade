#include "model/decoder.hpp"

#include <optional>

#include "model/byte_level.hpp"
#include "model/regex.hpp"
#include "model/utf8.hpp"

namespace brigade::model {
namespace {

using tokens_t = std::vector<std::string>;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xNN>" token, or -1. Like Rust's u8::from_str_radix, which the Hugging Face
// library uses, the two characters may also be a plus sign and one digit.
int fallback_byte(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  if (token[3] == '+') return hex_value(token[4]);
  const int high = hex_value(token[3]);
  const int low = hex_value(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// True when `bytes` are UTF-8 except for a last character that more bytes could complete.
bool could_complete(const std::string& bytes) {
  const std::size_t complete = utf8::complete_prefix_size(bytes);
  return complete < bytes.size() && utf8::is_valid(std::string_view(bytes).substr(0, complete));
}

tokens_t byte_level_step(const tokens_t& tokens, bool& incomplete) {
  std::string bytes;
  for (const std::string& t : tokens) {
    if (byte_level::is_byte_level(t)) {
      byte_level::decode_append(t, bytes);
    } else {
      bytes += t;
    }
  }
  incomplete = utf8::complete_prefix_size(bytes) < bytes.size();
  return {utf8::repair(bytes)};
}

void flush_bytes(std::string& bytes, tokens_t& out) {
  if (bytes.empty()) return;
  if (utf8::is_valid(bytes)) {
    out.push_back(bytes);
  } else {
    for (std::size_t i = 0; i < bytes.size(); ++i)
      out.emplace_back("\xEF\xBF\xBD");
  }
  bytes.clear();
}

tokens_t byte_fallback_step(tokens_t tokens, bool& incomplete) {
  tokens_t out;
  std::string bytes;
  for (std::string& t : tokens) {
    const int b = fallback_byte(t);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
      continue;
    }
    flush_bytes(bytes, out);
    out.push_back(std::move(t));
  }
  incomplete = could_complete(bytes);
  flush_bytes(bytes, out);
  return out;
}

// Removes up to `start` leading and `stop` trailing copies of the character `c` from `token`.
std::string strip(const std::string& token, const std::string& c, std::size_t start,
                  std::size_t stop) {
  std::size_t begin = 0;
  for (std::size_t n = 0; n < start && token.compare(begin, c.size(), c) == 0; ++n)
    begin += c.size();
  std::size_t end = token.size();
  for (std::size_t n = 0;
       n < stop && end >= begin + c.size() && token.compare(end - c.size(), c.size(), c) == 0;
       ++n) {
    end -= c.size();
  }
  return token.substr(begin, end - begin);
}

}  // namespace

struct decoder::step {
  enum class kind { byte_level, metaspace, replace, byte_fallback, fuse, strip } what;
  std::string text;  ///< Metaspace's replacement, Replace's content, Strip's character.
  std::optional<regex> pattern;
  bool strip_first = false;
  std::size_t start = 0;
  std::size_t stop = 0;

  tokens_t apply(tokens_t tokens, bool& incomplete) const;
};

tokens_t decoder::step::apply(tokens_t tokens, bool& incomplete) const {
  switch (what) {
    case kind::byte_level:
      return byte_level_step(tokens, incomplete);
    case kind::byte_fallback:
      return byte_fallback_step(std::move(tokens), incomplete);
    case kind::fuse: {
      std::string all;
      for (const std::string& t : tokens)
        all += t;
      return {all};
    }
    case kind::metaspace:
      for (std::size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = pattern->replace_all(tokens[i], i == 0 && strip_first ? "" : " ");
      return tokens;
    case kind::replace:
      for (std::string& t : tokens)
        t = pattern->replace_all(t, text);
      return tokens;
    case kind::strip:
      for (std::string& t : tokens)
        t = strip(t, text, start, stop);
      return tokens;
  }
  return tokens;
}

decoder::decoder() = default;
decoder::decoder(decoder&&) noexcept = default;
decoder& decoder::operator=(decoder&&) noexcept = default;
decoder::~decoder() = default;

void decoder::add_byte_level() {
  steps_.push_back(std::make_unique<step>(step{step::kind::byte_level, {}, {}, false, 0, 0}));
}

status decoder::add_metaspace(std::string replacement, bool strip_first) {
  auto literal = regex::literal(replacement);
  if (!literal) return literal.err();
  auto s = std::make_unique<step>(step{step::kind::metaspace, {}, {}, strip_first, 0, 0});
  s->pattern = std::move(*literal);
  s->text = std::move(replacement);
  steps_.push_back(std::move(s));
  return ok_status();
}

status decoder::add_replace(const std::string& pattern, bool is_regex, std::string content) {
  auto compiled = is_regex ? regex::compile(pattern) : regex::literal(pattern);
  if (!compiled) return compiled.err();
  auto s = std::make_unique<step>(step{step::kind::replace, std::move(content), {}, false, 0, 0});
  s->pattern = std::move(*compiled);
  steps_.push_back(std::move(s));
  return ok_status();
}

void decoder::add_byte_fallback() {
  steps_.push_back(std::make_unique<step>(step{step::kind::byte_fallback, {}, {}, false, 0, 0}));
}

void decoder::add_fuse() {
  steps_.push_back(std::make_unique<step>(step{step::kind::fuse, {}, {}, false, 0, 0}));
}

void decoder::add_strip(std::string content, std::size_t start, std::size_t stop) {
  steps_.push_back(
      std::make_unique<step>(step{step::kind::strip, std::move(content), {}, false, start, stop}));
}

std::string decoder::decode(std::vector<std::string> tokens, bool* incomplete) const {
  bool tail_open = false;
  for (const auto& s : steps_) {
    bool step_open = false;
    tokens = s->apply(std::move(tokens), step_open);
    tail_open = tail_open || step_open;
  }
  if (incomplete != nullptr) *incomplete = tail_open;
  std::string out;
  for (const std::string& t : tokens)
    out += t;
  return utf8::is_valid(out) ? out : utf8::repair(out);
}

}  // namespace brigade::model

#include "model/pre_tokenizer.hpp"

#include <algorithm>
#include <optional>

#include "model/regex.hpp"

namespace brigade::model {

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// A piece of text between steps, and whether it begins the whole input.
struct piece {
  std::string text;
  bool at_start = false;
};

// A stretch of a piece: a match of the pattern (after `invert`) or the text between two.
struct part {
  std::size_t start;
  std::size_t end;
  bool is_match;
};

// The Hugging Face library's split of a normalized string: the text is cut into matches and
// the gaps between them, and `behavior` decides what becomes of the matches.
void split_on(const regex& pattern, pre_tokenizer::split_behavior behavior, bool invert,
              const piece& in, std::vector<piece>& out) {
  using behavior_t = pre_tokenizer::split_behavior;
  // Reused per thread: splitting is hot, and it never calls itself.
  thread_local std::vector<regex::span> matches;
  thread_local std::vector<part> parts;
  thread_local std::vector<part> kept;
  matches.clear();
  parts.clear();
  kept.clear();
  pattern.find_all(in.text, matches);
  std::size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (prev < start) parts.push_back({prev, start, invert});
    parts.push_back({start, end, !invert});
    prev = end;
  }
  if (prev < in.text.size()) parts.push_back({prev, in.text.size(), invert});
  if (behavior == behavior_t::merged_with_next) std::reverse(parts.begin(), parts.end());
  bool previous_match = false;
  for (const part& p : parts) {
    // A match that follows a gap joins that gap; adjacent parts of one kind form a run.
    const bool match_after_gap = !kept.empty() && p.is_match && !previous_match;
    const bool same_as_previous = !kept.empty() && p.is_match == previous_match;
    if (behavior == behavior_t::isolated) {
      kept.push_back(p);
    } else if (behavior == behavior_t::removed) {
      if (!p.is_match) kept.push_back(p);
    } else if (behavior == behavior_t::contiguous && same_as_previous) {
      kept.back().end = p.end;
    } else if (behavior == behavior_t::merged_with_previous && match_after_gap) {
      kept.back().end = p.end;
    } else if (behavior == behavior_t::merged_with_next && match_after_gap) {
      kept.back().start = p.start;  // Walking backwards: "previous" is the part after it.
    } else {
      kept.push_back(p);
    }
    previous_match = p.is_match;
  }
  if (behavior == behavior_t::merged_with_next) std::reverse(kept.begin(), kept.end());
  for (const part& p : kept)
    out.push_back({in.text.substr(p.start, p.end - p.start), in.at_start && p.start == 0});
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

struct pre_tokenizer::step {
  enum class kind { split, byte_level, metaspace } what = kind::split;
  /// The Split pattern; ByteLevel's GPT-2 pattern (if use_regex); Metaspace's replacement.
  std::optional<regex> pattern;
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;
  std::string replacement;
  prepend_scheme scheme = prepend_scheme::always;
  bool split = true;

  void apply(piece in, std::vector<piece>& out) const;
};

void pre_tokenizer::step::apply(piece in, std::vector<piece>& out) const {
  switch (what) {
    case kind::split:
      split_on(*pattern, behavior, invert, in, out);
      return;
    case kind::byte_level:
      if (add_prefix_space && !starts_with(in.text, " ")) in.text.insert(0, " ");
      break;
    case kind::metaspace: {
      std::string replaced;
      replaced.reserve(in.text.size() + replacement.size());
      for (char c : in.text) {
        if (c == ' ') {
          replaced += replacement;
        } else {
          replaced.push_back(c);
        }
      }
      in.text.swap(replaced);
      const bool prepend =
          scheme == prepend_scheme::always || (scheme == prepend_scheme::first && in.at_start);
      if (prepend && !starts_with(in.text, replacement)) in.text.insert(0, replacement);
      if (split) {
        split_on(*pattern, split_behavior::merged_with_next, false, in, out);
      } else {
        out.push_back(std::move(in));
      }
      return;
    }
  }
  if (pattern) {
    split_on(*pattern, split_behavior::isolated, false, in, out);
  } else {
    out.push_back(std::move(in));
  }
}

pre_tokenizer::pre_tokenizer() = default;
pre_tokenizer::pre_tokenizer(pre_tokenizer&&) noexcept = default;
pre_tokenizer& pre_tokenizer::operator=(pre_tokenizer&&) noexcept = default;
pre_tokenizer::~pre_tokenizer() = default;

status pre_tokenizer::add_split_regex(const std::string& pattern, split_behavior behavior,
                                      bool invert) {
  auto re = regex::compile(pattern);
  if (!re) return re.err();
  auto s = std::make_unique<step>();
  s->pattern = std::move(*re);
  s->behavior = behavior;
  s->invert = invert;
  steps_.push_back(std::move(s));
  return ok_status();
}

status pre_tokenizer::add_split_literal(const std::string& literal, split_behavior behavior,
                                        bool invert) {
  auto re = regex::literal(literal);
  if (!re) return re.err();
  auto s = std::make_unique<step>();
  s->pattern = std::move(*re);
  s->behavior = behavior;
  s->invert = invert;
  steps_.push_back(std::move(s));
  return ok_status();
}

status pre_tokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  auto s = std::make_unique<step>();
  s->what = step::kind::byte_level;
  s->add_prefix_space = add_prefix_space;
  if (use_regex) {
    auto re = regex::compile(kGpt2SplitPattern);
    if (!re) return re.err();
    s->pattern = std::move(*re);
  }
  steps_.push_back(std::move(s));
  return ok_status();
}

status pre_tokenizer::add_metaspace(const std::string& replacement, prepend_scheme scheme,
                                    bool split) {
  auto re = regex::literal(replacement);
  if (!re) return re.err();
  auto s = std::make_unique<step>();
  s->what = step::kind::metaspace;
  s->pattern = std::move(*re);
  s->replacement = replacement;
  s->scheme = scheme;
  s->split = split;
  steps_.push_back(std::move(s));
  return ok_status();
}

bool pre_tokenizer::has_byte_level() const {
  return std::any_of(steps_.begin(), steps_.end(),
                     [](const auto& s) { return s->what == step::kind::byte_level; });
}

void pre_tokenizer::split(std::string_view text, std::vector<std::string>& pieces,
                          bool at_start) const {
  if (text.empty()) return;
  std::vector<piece> current{{std::string(text), at_start}};
  std::vector<piece> next;
  for (const auto& s : steps_) {
    next.clear();
    for (piece& p : current)
      s->apply(std::move(p), next);
    current.swap(next);
  }
  for (piece& p : current)
    pieces.push_back(std::move(p.text));
}

}  // namespace brigade::model

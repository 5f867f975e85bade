#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/pre_tokenizer.hpp"

#include <pcre2.h>

namespace brigade::model {

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// The JIT's backtracking stack grows up to this size; the patterns above need little, but a
// pattern from a file may backtrack deeply over a long input.
constexpr PCRE2_SIZE kJitStackBytes = 8 << 20;

struct code_deleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

// One match data block and JIT stack per thread, reused across calls: matching is hot and the
// compiled code itself is safe to share between threads.
struct match_scratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 << 10, kJitStackBytes, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  match_scratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~match_scratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
  match_scratch(const match_scratch&) = delete;
  match_scratch& operator=(const match_scratch&) = delete;
};

match_scratch& scratch() {
  thread_local match_scratch s;
  return s;
}

std::size_t utf8_char_size(unsigned char lead) {
  return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
}

}  // namespace

struct pre_tokenizer::step {
  enum class kind { split, byte_level } what = kind::split;
  std::unique_ptr<pcre2_code, code_deleter> regex;
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;

  void apply(const std::string& piece, std::vector<std::string>& out) const;
  void split(std::string_view text, std::vector<std::string>& out) const;
};

// Splits on every non-empty match. An empty match emits nothing and moves the search on by one
// character, so that a pattern which can match empty still terminates.
void pre_tokenizer::step::split(std::string_view text, std::vector<std::string>& out) const {
  match_scratch& s = scratch();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t gap_start = 0;
  std::size_t search = 0;
  const auto emit = [&](std::size_t from, std::size_t to, bool is_match) {
    if (to <= from) return;
    const bool keep = behavior == split_behavior::isolated || (is_match == invert);
    if (keep) out.emplace_back(text.substr(from, to - from));
  };
  while (search < text.size()) {
    const int rc = pcre2_match(regex.get(), subject, text.size(), search, PCRE2_NO_UTF_CHECK,
                               s.data, s.context);
    if (rc < 0) break;  // No match (or a resource limit): the rest is one gap.
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    const std::size_t start = ov[0];
    const std::size_t end = ov[1];
    if (end == start) {
      search = start + utf8_char_size(static_cast<unsigned char>(text[start]));
      continue;
    }
    emit(gap_start, start, false);
    emit(start, end, true);
    gap_start = search = end;
  }
  emit(gap_start, text.size(), false);
}

void pre_tokenizer::step::apply(const std::string& piece, std::vector<std::string>& out) const {
  if (what == kind::split) {
    split(piece, out);
    return;
  }
  if (add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    const std::string spaced = " " + piece;
    if (regex) {
      split(spaced, out);
    } else {
      out.push_back(spaced);
    }
    return;
  }
  if (regex) {
    split(piece, out);
  } else {
    out.push_back(piece);
  }
}

pre_tokenizer::pre_tokenizer() = default;
pre_tokenizer::pre_tokenizer(pre_tokenizer&&) noexcept = default;
pre_tokenizer& pre_tokenizer::operator=(pre_tokenizer&&) noexcept = default;
pre_tokenizer::~pre_tokenizer() = default;

namespace {

// Unicode properties (\p{L}, and \s as Unicode whitespace) as the Hugging Face library has
// them. PCRE2 accepts UTF but not UCP together with LITERAL, where it does not matter anyway.
constexpr uint32_t kRegexOptions = PCRE2_UTF | PCRE2_UCP;
constexpr uint32_t kLiteralOptions = PCRE2_UTF | PCRE2_LITERAL;

result<std::unique_ptr<pcre2_code, code_deleter>> compile(const std::string& pattern,
                                                          uint32_t options) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 options, &code, &offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    return error{errc::bad_format, "regular expression '" + pattern + "' does not compile at " +
                                       "offset " + std::to_string(offset) + ": " +
                                       reinterpret_cast<const char*>(message)};
  }
  // The JIT is several times faster; without it (an unsupported CPU) the interpreter is used.
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<pcre2_code, code_deleter>(re);
}

}  // namespace

status pre_tokenizer::add_split_regex(const std::string& pattern, split_behavior behavior,
                                      bool invert) {
  auto re = compile(pattern, kRegexOptions);
  if (!re) return re.err();
  auto s = std::make_unique<step>();
  s->regex = std::move(*re);
  s->behavior = behavior;
  s->invert = invert;
  steps_.push_back(std::move(s));
  return ok_status();
}

status pre_tokenizer::add_split_literal(const std::string& literal, split_behavior behavior,
                                        bool invert) {
  if (literal.empty()) {
    return error{errc::bad_format, "a Split pre-tokenizer's String pattern must not be empty"};
  }
  auto re = compile(literal, kLiteralOptions);
  if (!re) return re.err();
  auto s = std::make_unique<step>();
  s->regex = std::move(*re);
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
    auto re = compile(kGpt2SplitPattern, kRegexOptions);
    if (!re) return re.err();
    s->regex = std::move(*re);
  }
  steps_.push_back(std::move(s));
  return ok_status();
}

void pre_tokenizer::split(std::string_view text, std::vector<std::string>& pieces) const {
  if (text.empty()) return;
  std::vector<std::string> current{std::string(text)};
  std::vector<std::string> next;
  for (const auto& s : steps_) {
    next.clear();
    for (const std::string& piece : current)
      s->apply(piece, next);
    current.swap(next);
  }
  for (std::string& piece : current)
    pieces.push_back(std::move(piece));
}

}  // namespace brigade::model

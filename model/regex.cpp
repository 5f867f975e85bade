#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/regex.hpp"

#include <pcre2.h>

namespace brigade::model {
namespace {

// The JIT's backtracking stack grows up to this size; the usual split patterns need little, but
// a pattern from a file may backtrack deeply over a long input.
constexpr PCRE2_SIZE kJitStackBytes = 8 << 20;

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

struct regex::compiled {
  pcre2_code* code = nullptr;
  ~compiled() { pcre2_code_free(code); }
};

regex::regex() = default;
regex::regex(regex&&) noexcept = default;
regex& regex::operator=(regex&&) noexcept = default;
regex::~regex() = default;

result<regex> regex::compile(const std::string& pattern) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    return error{errc::bad_format, "regular expression '" + pattern + "' does not compile at " +
                                       "offset " + std::to_string(offset) + ": " +
                                       reinterpret_cast<const char*>(message)};
  }
  // The JIT is several times faster; without it (an unsupported CPU) the interpreter is used.
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  regex out;
  out.compiled_ = std::make_unique<compiled>();
  out.compiled_->code = re;
  return out;
}

result<regex> regex::literal(const std::string& text) {
  if (text.empty()) return error{errc::bad_format, "a String pattern must not be empty"};
  regex out;
  out.literal_ = text;
  return out;
}

void regex::find_all(std::string_view subject, std::vector<span>& out) const {
  if (!compiled_) {
    for (std::size_t at = subject.find(literal_); at != std::string_view::npos;
         at = subject.find(literal_, at + literal_.size())) {
      out.emplace_back(at, at + literal_.size());
    }
    return;
  }
  match_scratch& s = scratch();
  const auto text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::size_t search = 0;
  while (search < subject.size()) {
    const int rc = pcre2_match(compiled_->code, text, subject.size(), search, PCRE2_NO_UTF_CHECK,
                               s.data, s.context);
    if (rc < 0) return;  // No match (or a resource limit): nothing more to find.
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    if (ov[1] == ov[0]) {
      if (ov[0] >= subject.size()) return;
      search = ov[0] + utf8_char_size(static_cast<unsigned char>(subject[ov[0]]));
      continue;
    }
    out.emplace_back(ov[0], ov[1]);
    search = ov[1];
  }
}

std::string regex::replace_all(std::string_view subject, std::string_view content) const {
  thread_local std::vector<span> matches;
  matches.clear();
  find_all(subject, matches);
  if (matches.empty()) return std::string(subject);
  std::string out;
  out.reserve(subject.size() + matches.size() * content.size());
  std::size_t copied = 0;
  for (const auto& [start, end] : matches) {
    out.append(subject.substr(copied, start - copied));
    out.append(content);
    copied = end;
  }
  out.append(subject.substr(copied));
  return out;
}

}  // namespace brigade::model

#include "model/normalizer.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <cstdint>
#include <optional>

#include "model/regex.hpp"

namespace brigade::model {
namespace {

const icu::Normalizer2* instance(normalizer::form f, UErrorCode& status) {
  switch (f) {
    case normalizer::form::nfc:
      return icu::Normalizer2::getNFCInstance(status);
    case normalizer::form::nfd:
      return icu::Normalizer2::getNFDInstance(status);
    case normalizer::form::nfkc:
      return icu::Normalizer2::getNFKCInstance(status);
    case normalizer::form::nfkd:
      return icu::Normalizer2::getNFKDInstance(status);
  }
  return nullptr;
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// ASCII text is already in every normalization form, which spares ICU on most input. ICU
// measures strings in int32_t; text past 2 GiB (far beyond any prompt) stays as it is.
void normalize_form(normalizer::form f, std::string& text) {
  if (text.size() > static_cast<std::size_t>(INT32_MAX) || is_ascii(text)) return;
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = instance(f, status);
  if (n == nullptr || U_FAILURE(status)) return;  // ICU data missing: leave text as it is.
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
  std::string normalized;
  normalized.reserve(text.size());
  icu::StringByteSink<std::string> sink(&normalized);
  status = U_ZERO_ERROR;
  n->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_SUCCESS(status)) text.swap(normalized);
}

}  // namespace

struct normalizer::step {
  enum class kind { form, prepend, replace } what = kind::form;
  form unicode_form = form::nfc;
  std::string content;  ///< What Prepend puts in front, or what Replace writes.
  std::optional<regex> pattern;
};

normalizer::normalizer() = default;
normalizer::normalizer(normalizer&&) noexcept = default;
normalizer& normalizer::operator=(normalizer&&) noexcept = default;
normalizer::~normalizer() = default;

void normalizer::add(form f) {
  auto s = std::make_unique<step>();
  s->unicode_form = f;
  steps_.push_back(std::move(s));
}

void normalizer::add_prepend(std::string prefix) {
  auto s = std::make_unique<step>();
  s->what = step::kind::prepend;
  s->content = std::move(prefix);
  steps_.push_back(std::move(s));
}

status normalizer::add_replace(const std::string& pattern, bool is_regex, std::string content) {
  auto compiled = is_regex ? regex::compile(pattern) : regex::literal(pattern);
  if (!compiled) return compiled.err();
  auto s = std::make_unique<step>();
  s->what = step::kind::replace;
  s->content = std::move(content);
  s->pattern = std::move(*compiled);
  steps_.push_back(std::move(s));
  return ok_status();
}

std::string normalizer::apply(std::string_view text) const {
  std::string current(text);
  for (const auto& s : steps_) {
    switch (s->what) {
      case step::kind::form:
        normalize_form(s->unicode_form, current);
        break;
      case step::kind::prepend:
        if (!current.empty()) current.insert(0, s->content);
        break;
      case step::kind::replace:
        current = s->pattern->replace_all(current, s->content);
        break;
    }
  }
  return current;
}

}  // namespace brigade::model

#include "model/normalizer.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <cstdint>

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

}  // namespace

// ASCII text is already in every normalization form, which spares ICU on most input.
std::string normalizer::apply(std::string_view text) const {
  std::string current(text);
  // ICU measures strings in int32_t; text past 2 GiB (far beyond any prompt) stays as it is.
  const bool too_long = text.size() > static_cast<std::size_t>(INT32_MAX);
  if (forms_.empty() || too_long || is_ascii(text)) return current;
  for (form f : forms_) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = instance(f, status);
    if (n == nullptr || U_FAILURE(status)) continue;  // ICU data missing: leave text as it is.
    const icu::StringPiece piece(current.data(), static_cast<int32_t>(current.size()));
    if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) continue;
    std::string normalized;
    normalized.reserve(current.size());
    icu::StringByteSink<std::string> sink(&normalized);
    status = U_ZERO_ERROR;
    n->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_SUCCESS(status)) current.swap(normalized);
  }
  return current;
}

}  // namespace brigade::model

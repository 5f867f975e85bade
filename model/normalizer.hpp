// The text normalizer of a tokenizer.json: a sequence of Unicode normalization forms.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace brigade::model {

class normalizer {
 public:
  enum class form { nfc, nfd, nfkc, nfkd };

  /// The identity normalizer (tokenizer.json's "normalizer": null); add forms in order.
  normalizer() = default;
  void add(form f) { forms_.push_back(f); }
  bool is_identity() const { return forms_.empty(); }

  /// `text` (valid UTF-8) normalized by each form in turn.
  std::string apply(std::string_view text) const;

 private:
  std::vector<form> forms_;
};

}  // namespace brigade::model

// The post-processor of a tokenizer.json, for one sequence: the special tokens a template puts
// around the encoded text when the caller asks for them (add_special_tokens), such as Llama's
// and Mistral's "<s>" in front. ByteLevel post-processors only adjust offsets, so they add
// nothing here.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace brigade::model {

class post_processor {
 public:
  /// One piece of a template: special token ids, or (with no ids) the sequence itself.
  struct item {
    bool is_sequence = false;
    std::vector<int32_t> ids;  ///< The special tokens' ids, for items that are not the sequence.
  };

  /// Appends a template (TemplateProcessing's "single"); templates apply in the order added.
  void add_template(std::vector<item> items) { templates_.push_back(std::move(items)); }
  /// True when some template adds tokens.
  bool adds_tokens() const;

  /// `ids` with every template applied.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;

 private:
  std::vector<std::vector<item>> templates_;
};

}  // namespace brigade::model

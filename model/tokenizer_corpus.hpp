// The text that the tokenizers of generated checkpoints are trained on.
#pragma once

#include <string_view>

namespace brigade::model {

/// A few kilobytes of English prose and source code, written for brigade and fixed forever:
/// changing it changes every generated tokenizer.
std::string_view tokenizer_corpus();

}  // namespace brigade::model

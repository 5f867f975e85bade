// A tiny byte-level BPE tokenizer.json whose ids can be checked by hand, and a scratch
// directory to write it (or a damaged copy) into.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.hpp"
#include "model/tokenizer.hpp"

namespace brigade::model::testing {

/// Vocabulary: byte b has id b; then "he"=256, "ll"=257, "hell"=258, "hello"=259, "Ġw"=260,
/// "or"=261, "Ġwor"=262, "aa"=263, "bc"=264 from merges in that rank order ("a a" then
/// "b c" then "a b", whose "ab"=265 comes last). Added tokens: <|im_start|>=300 and
/// <|im_end|>=301 (special), <think>=302 (not special). Qwen's split pattern, NFC.
nlohmann::json tiny_tokenizer_json();

/// A fresh empty directory under the build tree, unique to this call, removed at exit.
std::string scratch_dir(const std::string& label);

/// Writes `tokenizer` (and `config` unless null) into a fresh directory and loads it.
result<tokenizer> load_json(const nlohmann::json& tokenizer,
                            const nlohmann::json& config = nlohmann::json());

/// Writes `text` as DIR/tokenizer.json in a fresh directory and loads it.
result<tokenizer> load_text(const std::string& text);

}  // namespace brigade::model::testing

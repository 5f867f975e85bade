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

/// A tiny SentencePiece-style tokenizer.json in the legacy Llama-2/Mistral form: normalizer
/// Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, byte_fallback, decoder Replace +
/// ByteFallback + Fuse + Strip, and a "<s> $A" template. Vocabulary: <unk>=0, <s>=1, </s>=2
/// (special added tokens), <0x00>..<0xFF> = 3 + byte, then "▁"=259 "h"=260 "e"=261 "l"=262
/// "o"=263 "w"=264 "r"=265 "d"=266, and from merges in rank order "▁h"=267 "ll"=268
/// "▁he"=269 "▁hell"=270 "▁hello"=271 "▁w"=272 "or"=273 "▁wor"=274 "▁▁"=275.
nlohmann::json llama_tokenizer_json();

/// A fresh empty directory under the build tree, unique to this call, removed at exit.
std::string scratch_dir(const std::string& label);

/// Writes `tokenizer` (and `config` unless null) into a fresh directory and loads it.
result<tokenizer> load_json(const nlohmann::json& tokenizer,
                            const nlohmann::json& config = nlohmann::json());

/// Writes `text` as DIR/tokenizer.json in a fresh directory and loads it.
result<tokenizer> load_text(const std::string& text);

}  // namespace brigade::model::testing

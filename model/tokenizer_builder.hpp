// Writes a small byte-level BPE tokenizer in the Hugging Face format, for generated checkpoints.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace brigade::model {

struct tokenizer_spec {
  /// Total ids, added tokens included. At least 256 bytes + the special tokens + 1.
  int32_t vocab_size = 1024;
  /// Hugging Face model_type, which decides the special tokens and chat format.
  std::string model_type = "qwen3_moe";
  /// Written to tokenizer_config.json; the model's context length.
  int64_t model_max_length = 32768;
};

/// Writes DIR/tokenizer.json and DIR/tokenizer_config.json (creating DIR). Merges are learned by
/// a small BPE trainer from an embedded English/code corpus, deterministically, so the files
/// never change. When the corpus runs out of pairs before vocab_size, the rest of the ids are
/// special "<|reserved_N|>" tokens, as real checkpoints pad their vocabularies.
///
/// Special tokens by family (chat_format_for): chatml has <|endoftext|>, <|im_start|> and
/// <|im_end|> (eos <|im_end|>); mistral_inst has <s> and </s> (bos <s>, eos </s>); tulu has
/// <|endoftext|> and <|padding|> (eos <|endoftext|>).
status write_byte_level_tokenizer(const std::string& dir, const tokenizer_spec& spec);

}  // namespace brigade::model
